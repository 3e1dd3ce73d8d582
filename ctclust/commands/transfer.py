"""SentEval transfer tasks on frozen sentence embeddings (docs/evaluation.md), under a named protocol.

The tasks, protocols and settings are :mod:`evaluation.benchmarks.transfer`'s.

    python tools.py transfer --model minilm --protocol senteval --setting default --jobs 2
"""
from __future__ import annotations

import logging
from typing import Sequence

from ctclust.commands.common import add_trust_option, tool_parser
from evaluation.benchmarks.senteval.readers import ALL_TASKS, TASKS
from evaluation.benchmarks.senteval.tasks import MRPC_FEATURES, PROTOCOLS, SETTING_NAMES
from evaluation.benchmarks.transfer import evaluate_model_transfer
from textcore import console
from textcore.errors import exit_on_user_error


def build_parser():
    """The options of ``python tools.py transfer``."""
    parser = tool_parser(
        "transfer",
        "SentEval transfer tasks on frozen embeddings under a named protocol (default: SentEval's "
        "PyTorch logistic regression, as the papers report).",
    )
    parser.add_argument("--model", required=True, help="run folder, .ckpt, exported or Hugging Face model folder, "
                        "Hub name, minilm or tiny (evaluation.model_io.load)")
    parser.add_argument("--pooling", default=None, choices=("mean", "cls", "cls_before_pooler"),
                        help="default: the model's own (a run's eval pooling, an exported folder's, else mean)")
    parser.add_argument(
        "--data-dir", default=None, help="SentEval data/downstream folder (default: the data folder's "
        "senteval/downstream, docs/data.md)"
    )
    parser.add_argument("--output", default="outputs/transfer", help="folder for transfer.md and transfer.json")
    parser.add_argument("--tasks", nargs="+", default=list(TASKS), choices=ALL_TASKS, help="transfer tasks to run")
    parser.add_argument(
        "--protocol",
        default="senteval",
        choices=PROTOCOLS,
        help="senteval: SentEval's PyTorch logistic regression (our code, the papers' protocol); sklearn: "
        "scikit-learn logistic regression; senteval-toolkit: the installed SentEval package",
    )
    parser.add_argument(
        "--setting",
        default="default",
        choices=SETTING_NAMES,
        help="SentEval classifier setting (senteval, senteval-toolkit)",
    )
    parser.add_argument("--max-train", type=int, default=None, help="subsample training sets (CV pools) to this size")
    parser.add_argument(
        "--max-length", type=int, default=128, help="token limit when embedding (SentEval does not truncate)"
    )
    parser.add_argument("--batch-size", type=int, default=128, help="texts per encoder batch")
    parser.add_argument("--seed", type=int, default=None, help="default: 1111 (senteval, toolkit), 0 (sklearn)")
    parser.add_argument("--kfold", type=int, default=None, help="default: the setting's (senteval), 10 (sklearn)")
    parser.add_argument(
        "--inner-kfold", type=int, default=None, help="sklearn only; default: same as --kfold; 0 = C fixed to 1"
    )
    parser.add_argument("--mrpc-features", default="senteval", choices=MRPC_FEATURES,
                        help="MRPC's pair features: senteval [|u-v|, u*v], full [u, v, |u-v|, u*v]")
    parser.add_argument(
        "--jobs", type=int, default=1, help="processes for the senteval protocol's folds (results do not change)"
    )
    parser.add_argument(
        "--toolkit-classifier",
        default=None,
        choices=("pytorch", "sklearn"),
        help="senteval-toolkit: SentEval's usepytorch (default: pytorch when CUDA is available; its PyTorch "
        "classifier needs CUDA)",
    )
    parser.add_argument("--threads", type=int, default=None, help="torch CPU threads for embedding (default: torch's)")
    add_trust_option(parser)
    return parser


@exit_on_user_error
def main(argv: Sequence[str] | None = None) -> dict:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.toolkit_classifier and args.protocol != "senteval-toolkit":
        parser.error("--toolkit-classifier applies to --protocol senteval-toolkit only")
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    return evaluate_model_transfer(**vars(args))


if __name__ == "__main__":
    console.run_cli(main)
