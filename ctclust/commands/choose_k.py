"""Choose the number of clusters K of a corpus without labels (docs/clusters.md, "Without labels").

    python tools.py choose-k --input texts.csv [--text-column text] [--model minilm] --k 2:60
    python tools.py choose-k --run logs/train/runs/<run>/<time> --k 2:60:2 --output choose_k/

The work is :func:`evaluation.model_io.embed_and_choose_k.recommend_k`.
"""
from __future__ import annotations

from pathlib import Path
from typing import Sequence

from ctclust.commands.common import add_trust_option, tool_parser
from evaluation.clustering.choose_k import RULES, conf_defaults
from evaluation.model_io.embed_and_choose_k import recommend_k
from textcore import console
from textcore.device_settings import OUTSIDE_TRAINING
from textcore.errors import exit_on_user_error
from textcore.kmeans import KMEANS_BACKENDS


@exit_on_user_error
def main(argv: Sequence[str] | None = None) -> dict:
    parser = tool_parser("choose-k", __doc__)
    defaults = conf_defaults()  # conf/config.yaml's choose_k, as a run's num_clusters=auto scans
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--run", type=Path, help="a run folder: its end-of-run embeddings, nothing embedded")
    source.add_argument("--input", type=Path,
                        help="a text file (CSV/TSV, JSON Lines, Parquet, one text per line), embedded with --model")
    parser.add_argument("--text-column", default="text", help="column of the texts (plain text files: text)")
    parser.add_argument("--encoding", default=None, help="encoding of --input (default utf-8)")
    parser.add_argument("--model", default="minilm", help="encoder for --input: run folder, checkpoint, model folder, "
                        "Hub name, minilm (default) or tiny")
    parser.add_argument("--pooling", default=None, choices=("mean", "cls", "cls_before_pooler"),
                        help="default: the model's own")
    parser.add_argument("--max-length", type=int, default=32, help="token limit (the papers' clustering length: 32)")
    parser.add_argument("--k", default=defaults["k"], help="lo:hi, lo:hi:step or a list")
    parser.add_argument("--kmeans-runs", type=int, default=defaults["kmeans_runs"],
                        help="KMeans runs per K, with seeds 0..N-1 (stability compares them)")
    parser.add_argument("--rule", default=defaults["rule"], choices=tuple(RULES), help="the criterion that picks K")
    parser.add_argument("--silhouette-sample", type=int, default=defaults["silhouette_sample"],
                        help="texts the silhouette is computed on")
    parser.add_argument("--max-texts", type=int, default=defaults["max_texts"],
                        help="scan a seeded sample of this many texts (0: all; the cost grows with N x K)")
    parser.add_argument("--hdbscan-min-cluster-size", type=int, default=10,
                        help="HDBSCAN's smallest cluster (its number of clusters is shown beside the scan)")
    parser.add_argument("--kmeans-backend", default=OUTSIDE_TRAINING["kmeans_backend"], choices=KMEANS_BACKENDS,
                        help="KMeans implementation (default %(default)s)")
    parser.add_argument("--batch-size", type=int, default=128, help="texts per encoder batch")
    parser.add_argument("--embedding-cache", type=Path, default=None,
                        help="folder keeping the embeddings of --input for later scans")
    parser.add_argument("--output", type=Path, default=None, help="folder for choose_k.json/.md/.png "
                        "(default: <run>/choose_k or outputs/choose_k/<file stem>)")
    add_trust_option(parser)
    args = parser.parse_args(argv)
    return recommend_k(**vars(args))


if __name__ == "__main__":
    console.run_cli(main)
