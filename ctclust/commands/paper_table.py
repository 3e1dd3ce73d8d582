"""A paper's published table beside this project's runs (docs/evaluation.md, "The paper's table beside yours").

    python tools.py paper-table sccl_table1 --runs <runs>

The work is :func:`evaluation.across_runs.paper_table.compare_with_paper`.
"""
from __future__ import annotations

from pathlib import Path
from typing import Sequence

from ctclust.commands.common import tool_parser
from evaluation.across_runs.paper_table import available, compare_with_paper
from textcore import console, run_folder
from textcore.errors import exit_on_user_error


@exit_on_user_error
def main(argv: Sequence[str] | None = None) -> str:
    parser = tool_parser("paper-table", __doc__)
    parser.add_argument("table", nargs="?", help=f"one of: {', '.join(available())} (or a .yaml file)")
    parser.add_argument("--runs", type=Path,
                        help=f"folder searched for {run_folder.RESULTS} and evaluate_model JSON files")
    parser.add_argument("--output", type=Path, default=None, help="also write the Markdown here")
    parser.add_argument("--list", action="store_true", help="list the paper tables")
    args = parser.parse_args(argv)
    return compare_with_paper(**vars(args))


if __name__ == "__main__":
    console.run_cli(main)
