"""Evaluate any model on clustering, STS and transfer from one command (docs/evaluation.md).

    python tools.py evaluate --model minilm --tasks clustering,sts --output <folder>
    python tools.py evaluate --compare <a>.json <b>.json

The tasks and protocols are :mod:`evaluation.benchmarks.evaluate_model`'s.
"""
from __future__ import annotations

from pathlib import Path
from typing import Sequence

from ctclust.commands.common import add_backend_argument, add_trust_option, tool_parser
from evaluation.benchmarks.clustering_tasks import BENCHMARKS, CLUSTERING_PROTOCOLS, DATA
from evaluation.benchmarks.encoder_evaluation import DEFAULT_TASKS, TASKS, compare_files
from evaluation.benchmarks.evaluate_model import evaluate_model
from textcore import console
from textcore.device_settings import OUTSIDE_TRAINING
from textcore.errors import exit_on_user_error
from textcore.kmeans import KMEANS_BACKENDS


def build_parser():
    """The options of ``python tools.py evaluate``."""
    parser = tool_parser("evaluate", __doc__)
    parser.add_argument("--model", help="run dir, .ckpt, sentence-transformers/HF folder, Hub name, minilm or tiny; "
                        "tfidf or bow: the bag-of-words clustering baselines")
    parser.add_argument(
        "--compare", nargs="+", metavar="JSON", help="print a side-by-side table of result files and exit"
    )
    parser.add_argument("--tasks", default=",".join(DEFAULT_TASKS), help=f"comma-separated subset of {','.join(TASKS)}")
    parser.add_argument(
        "--pooling",
        default=None,
        choices=("mean", "cls", "cls_before_pooler"),
        help="override the model's evaluation pooling",
    )
    parser.add_argument("--output", type=Path, default=Path("outputs/evaluation"), help="folder for <model>.md/.json")
    parser.add_argument("--name", default=None, help="label and file stem (default: derived from --model)")
    parser.add_argument("--kmeans-runs", type=int, default=10, help="KMeans runs, with seeds 0..N-1 (PairSupCon: 10)")
    parser.add_argument(
        "--kmeans-backend", default=OUTSIDE_TRAINING["kmeans_backend"], choices=KMEANS_BACKENDS,
        help="KMeans implementation (default %(default)s; all float32, seeded)",
    )
    parser.add_argument("--kmeans-n-init", type=int, default=10, help="KMeans restarts per seed")
    parser.add_argument(
        "--clustering-protocol", default="pairsupcon", choices=tuple(CLUSTERING_PROTOCOLS),
        help="pairsupcon (default): evaluation pooling, 32 tokens, --kmeans-runs KMeans runs; clusterns: ClusterNS "
        "Table 6, raw [CLS], 128 tokens, one scikit-learn KMeans (overrides --pooling, --kmeans-runs, "
        "--kmeans-backend)",
    )
    parser.add_argument(
        "--clustering-max-length", type=int, default=None,
        help="token limit of the clustering embeddings (default: the protocol's, 32 or 128; PairSupCon's own "
        "evaluation code embeds at 64, as experiment=pairsupcon_* evaluates)",
    )
    parser.add_argument(
        "--embedding-cache", type=Path, default=None,
        help="folder keeping the embeddings (keyed by a hash of the weights) for later runs of the same model",
    )
    parser.add_argument("--datasets", default=",".join(BENCHMARKS), help="clustering benchmarks (conf/dataset names)")
    parser.add_argument("--short-text-dir", type=Path, default=DATA / "short_text",
                        help="folder of the clustering benchmarks' CSVs")
    parser.add_argument("--encoding", default=None,
                        help="text encoding of the clustering CSVs (default: each dataset config's, utf-8)")
    parser.add_argument("--senteval-dir", type=Path, default=DATA / "senteval" / "downstream",
                        help="SentEval's downstream folder (STS and transfer tasks)")
    parser.add_argument("--batch-size", type=int, default=128, help="texts per encoder batch")
    add_backend_argument(parser)
    parser.add_argument(
        "--transfer-max-train", type=int, default=None, help="subsample transfer training sets (quick runs)"
    )
    parser.add_argument(
        "--transfer-kfold", type=int, default=None, help="default: the protocol's (senteval: its setting's, sklearn 10)"
    )
    parser.add_argument(
        "--transfer-protocol",
        default="senteval",
        choices=("senteval", "sklearn", "senteval-toolkit"),
        help="senteval: SentEval's PyTorch logistic regression (the papers'); sklearn: scikit-learn logistic "
        "regression; senteval-toolkit: the installed SentEval package",
    )
    parser.add_argument(
        "--transfer-setting", default="default", choices=("default", "prototyping"), help="SentEval classifier setting"
    )
    parser.add_argument("--transfer-jobs", type=int, default=1, help="processes for the senteval protocol's folds")
    parser.add_argument(
        "--mteb-tasks", default="",
        help="with --tasks mteb: comma-separated MTEB task names (e.g. STS12,SciDocsRR) or local tables "
        "(text,label: clustering; sentence1,sentence2,score: STS)",
    )
    parser.add_argument(
        "--mteb-max-length", type=int, default=None,
        help="token limit for MTEB (default: a run's or checkpoint's max_length; other models: their position limit)"
    )
    parser.add_argument("--mteb-sts-range", default="0:5", help="lo:hi of the scores of local STS tables")
    parser.add_argument("--few-shot-k", type=int, default=16, help="--tasks few_shot: examples per class (16)")
    parser.add_argument("--few-shot-sets", type=int, default=5, help="--tasks few_shot: sampled training sets (5)")
    add_trust_option(parser)
    return parser

@exit_on_user_error
def main(argv: Sequence[str] | None = None) -> dict | str:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.compare:
        table = compare_files(args.compare)
        print(table)
        return table
    if not args.model:
        parser.error("--model is required (or use --compare)")
    return evaluate_model(args)


if __name__ == "__main__":
    console.run_cli(main)
