"""Semantic textual similarity evaluation (docs/evaluation.md): STS12–16, STS-B, SICK-R.

The protocol (SimCSE's: Spearman of the cosine scores, no training) is :mod:`evaluation.benchmarks.sts`.

    python tools.py sts --model minilm --output /tmp/sts
    python tools.py sts --checkpoint <run>/checkpoints/best.ckpt --output <run>/sts
"""
from __future__ import annotations

from pathlib import Path
from typing import Sequence

from ctclust.commands.common import add_trust_option, tool_parser
from evaluation.benchmarks.sts import AGGREGATIONS, STS_TASKS, default_data_dir, evaluate_model_sts
from textcore import console
from textcore.errors import exit_on_user_error


@exit_on_user_error
def main(argv: Sequence[str] | None = None) -> dict:
    parser = tool_parser("sts", __doc__)
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--model", help="run folder, .ckpt, exported or Hugging Face model folder, Hub name, "
                        "'minilm' or 'tiny' (evaluation.model_io.load)")
    source.add_argument(
        "--checkpoint",
        type=Path,
        help="a Lightning checkpoint of this project (e.g. <run>/checkpoints/best.ckpt): its encoder and eval pooling",
    )
    parser.add_argument(
        "--pooling",
        default=None,
        choices=("mean", "cls", "cls_before_pooler"),
        help="default: the model's own (a run's eval pooling, an exported folder's, else mean)",
    )
    parser.add_argument("--data-dir", type=Path, default=default_data_dir(), help="SentEval 'downstream' folder")
    parser.add_argument("--aggregation", default="all", choices=AGGREGATIONS,
                        help="how STS12-16's subsets make one score: all pooled, their mean, or weighted mean")
    parser.add_argument("--tasks", nargs="+", default=list(STS_TASKS), help="STS tasks to evaluate")
    parser.add_argument("--batch-size", type=int, default=128, help="texts per encoder batch")
    parser.add_argument(
        "--max-length",
        type=int,
        default=None,
        help="token limit; default: the backbone's position limit (SimCSE's evaluation does not truncate)",
    )
    parser.add_argument("--output", type=Path, default=None, help="folder for sts.md and sts.json")
    add_trust_option(parser)
    args = parser.parse_args(argv)
    return evaluate_model_sts(**vars(args))


if __name__ == "__main__":
    console.run_cli(main)
