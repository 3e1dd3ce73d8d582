"""Choose the number of clusters K of a corpus without labels (docs/clusters.md, "Without labels").

    python tools.py choose-k --input texts.csv [--text-column text] [--model minilm] --k 2:60
    python tools.py choose-k --run logs/train/runs/<run>/<time> --k 2:60:2 --output choose_k/

The texts of ``--input`` are embedded once (``--embedding-cache`` keeps them on disk); a run folder (``--run``)
gives its end-of-run embeddings, ``embeddings/after.npy``, and embeds nothing. The scan over K (``--kmeans-runs``
KMeans runs per K), the recommendation under ``--rule`` and the files written (``choose_k.json``, ``choose_k.md``,
``choose_k.png`` in ``--output``) are
:mod:`evaluation.clustering.choose_k`'s. A label column, if the file has one, is never read.
"""
from __future__ import annotations

import sys
from pathlib import Path
from typing import Sequence

import numpy as np

from evaluation.clustering.choose_k import RULES, choose_k, conf_defaults, parse_k, scan_rows, write_outputs
from evaluation.model_io import run_files
from textcore import console, run_folder
from textcore.device_settings import OUTSIDE_TRAINING
from textcore.errors import ConfigError, MissingFileError, exit_on_user_error
from textcore.kmeans import KMEANS_BACKENDS


def read_texts(path: Path, text_column: str, encoding: str | None = None) -> list[str]:
    """The non-empty texts of ``text_column`` of a file in any format the project reads."""
    from datamodules.table_reader import read_table

    table = read_table(path, encoding)
    if text_column not in table.columns:
        raise ConfigError(f"'{path}' has no column '{text_column}' (columns: {list(table.columns)}); "
                          "set --text-column.")
    texts = [t for t in table[text_column].dropna().astype(str) if t.strip()]
    if len(texts) < 3:
        raise ConfigError(f"'{path}': {len(texts)} non-empty texts in column '{text_column}'; K needs at least 3.")
    return texts


def saved_embeddings(run_dir: Path) -> np.ndarray:
    """The run's end-of-run embeddings, memory-mapped: the scan takes its sample's rows only."""
    embeddings = run_files.load_array(run_dir, run_files.EMBEDDINGS_AFTER)
    if embeddings is None:
        raise MissingFileError(f"'{run_dir}' has no {run_files.EMBEDDINGS_AFTER} (written by the end-of-run report); "
                               "give the data file with --input and the run with --model instead.")
    return embeddings


def embed_texts(texts: list[str], model: str, pooling: str | None, max_length: int | None, batch_size: int,
                cache_dir: Path | None, trust_checkpoint: bool = False) -> np.ndarray:
    from evaluation.model_io.embedding_cache import EmbeddingCache
    from evaluation.model_io.load import load_encoder

    encoder, pool = load_encoder(model, pooling, trust_checkpoint)
    if max_length is not None:
        limit = min(int(encoder.tokenizer.model_max_length), int(encoder.backbone.config.max_position_embeddings))
        if not 1 <= max_length <= limit:  # beyond the position embeddings the first long text stops the scan
            raise ConfigError(f"--max-length {max_length}: model '{model}' reads 1 to {limit} tokens; "
                              f"use e.g. --max-length 32 (the papers' clustering length).")
        encoder.max_length = max_length
    return EmbeddingCache(encoder, cache_dir, batch_size).encode(texts, pool)


@exit_on_user_error
def main(argv: Sequence[str] | None = None) -> dict:
    parser = console.tool_parser("choose-k", __doc__)
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
    run_folder.add_trust_option(parser)
    args = parser.parse_args(argv)

    def log(message: str) -> None:
        print(message, file=sys.stderr, flush=True)

    if args.run is not None:
        if not args.run.is_dir():
            raise MissingFileError(f"--run '{args.run}' is not a folder (give a run folder, or a text file "
                                   "with --input).")
        embeddings, title = saved_embeddings(args.run), args.run.name
        parse_k(args.k, min(len(embeddings), args.max_texts or len(embeddings)))
        out = args.output or args.run / "choose_k"
    elif args.input.is_file():
        texts = read_texts(args.input, args.text_column, args.encoding)
        parse_k(args.k, min(len(texts), args.max_texts or len(texts)))  # before the (slow) embedding
        keep = scan_rows(len(texts), args.max_texts)
        if keep is not None:  # the scan's sample is all that is embedded
            texts = [texts[i] for i in keep]
        log(f"choose_k: embedding {len(texts)} texts of {args.input} with {args.model}")
        embeddings = embed_texts(texts, args.model, args.pooling, args.max_length, args.batch_size,
                                 args.embedding_cache, args.trust_checkpoint)
        title = f"{args.input.name} ({args.model})"
        out = args.output or Path("outputs") / "choose_k" / args.input.stem
    else:
        raise MissingFileError(f"--input '{args.input}' is not a file (a run folder goes with --run).")
    result = choose_k(embeddings, args.k, args.kmeans_runs, args.rule, args.silhouette_sample,
                      args.hdbscan_min_cluster_size, kmeans_backend=args.kmeans_backend, log=log,
                      max_texts=args.max_texts)
    paths = write_outputs(result, out, title)
    rec = result["recommended"]
    print(f"recommended K = {rec['k']} ({rec['rule_text']}); HDBSCAN: {result['hdbscan'].get('clusters')} clusters")
    print("wrote " + ", ".join(str(p) for p in paths))
    return result


if __name__ == "__main__":
    console.run_cli(main)
