"""Command line: add augmentation columns to a short-text CSV/TSV, once, before training.

    python tools.py augment INPUT --output OUT --method eda --copies 2
    python tools.py augment OUT --in-place --method contextual --model bert-base-uncased
    # SCCL's two contextual-substitution views (python tools.py download <set>_views makes the authors' file so)
    python tools.py augment set.csv --output views.csv --method contextual --model roberta-base,bert-base-uncased \
        --share 0.2 --text-column text0

What it does is :mod:`datamodules.augment.columns`; this module only parses the arguments and calls it
(its defaults: ``columns.OPTION_DEFAULTS``).
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Sequence

from ctclust.commands.common import tool_parser
from datamodules.augment.columns import CONTEXTUAL, CONTEXTUAL_MODEL, OPTION_DEFAULTS, augment_file
from datamodules.augment.eda import PAPER_ALPHA
from textcore import console
from textcore.errors import exit_on_user_error


def build_parser() -> argparse.ArgumentParser:
    parser = tool_parser(
        "augment", "Add EDA or masked-LM (contextual) augmentation columns to a short-text CSV/TSV.")
    parser.add_argument("input", type=Path, help="CSV or TSV file with a text column")
    parser.add_argument("--output", type=Path, help="file to write (the input is never overwritten)")
    parser.add_argument("--in-place", action="store_true", help="write the new columns into INPUT")
    parser.add_argument("--overwrite", action="store_true",
                        help="allow replacing an existing output file or existing columns")
    parser.add_argument("--method", choices=("eda", "contextual"), required=True)
    parser.add_argument("--copies", type=int, default=OPTION_DEFAULTS["copies"],
                        help="augmented copies per text (contextual: per masked LM; default 1)")
    parser.add_argument("--seed", type=int, default=OPTION_DEFAULTS["seed"],
                        help="seed of the random choices (the words replaced)")
    parser.add_argument("--text-column", default=None,
                        help="column to augment (default: text0, else text)")
    parser.add_argument("--prefix", default=None,
                        help="new columns are PREFIX_1..PREFIX_COPIES (default eda / ctx)")
    parser.add_argument("--sep", default=None, help="input separator (default from extension)")
    parser.add_argument("--encoding", default=OPTION_DEFAULTS["encoding"],
                        help="input text encoding (default utf-8, e.g. latin-1, cp1252); the output is UTF-8")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")
    eda = parser.add_argument_group("eda")
    eda.add_argument("--alpha", type=float, default=None,
                     help=f"strength of every EDA operation (default {PAPER_ALPHA}, the paper's)")
    for op in ("sr", "ri", "rs", "rd"):
        eda.add_argument(f"--alpha-{op}", type=float, default=None, help=f"strength of {op} only")
    eda.add_argument("--operations", default=None,
                     help="comma-separated subset of sr,ri,rs,rd (default all four)")
    ctx = parser.add_argument_group("contextual")
    ctx.add_argument("--model", default=None,
                     help="masked LM(s), Hub names or local folders, comma-separated: each makes --copies copies of "
                     f"every text (default {CONTEXTUAL_MODEL}; SCCL's views: roberta-base,bert-base-uncased)")
    ctx.add_argument("--share", type=float, default=None,
                     help=f"share of the words replaced (default {CONTEXTUAL['share']}; SCCL's views: 0.2)")
    ctx.add_argument("--top-k", type=int, default=None,
                     help=f"predictions considered (default {CONTEXTUAL['top_k']})")
    ctx.add_argument("--batch-size", type=int, default=None,
                     help=f"texts per forward pass (default {CONTEXTUAL['batch_size']})")
    ctx.add_argument("--max-length", type=int, default=None,
                     help=f"token limit (default {CONTEXTUAL['max_length']})")
    ctx.add_argument("--device", default=None, help=f"{CONTEXTUAL['device']} (default), cpu, cuda, cuda:1, ...")
    return parser


@exit_on_user_error
def main(argv: Sequence[str] | None = None) -> None:
    argv = list(sys.argv[1:] if argv is None else argv)
    augment_file(build_parser().parse_args(argv), argv)


if __name__ == "__main__":
    console.run_cli(main)
