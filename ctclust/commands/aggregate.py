"""One table from many runs: mean ± std over seeds, datasets as columns, methods/variants as rows.

    python tools.py aggregate --runs logs/train/multiruns/<time>                # a multirun folder
    python tools.py aggregate --runs <run dir> <run dir> ... --output tables/  # any run folders

The grouping and the tables are :mod:`evaluation.across_runs.aggregate`'s.
"""
from __future__ import annotations

import argparse
from typing import Sequence

from ctclust.commands.common import tool_parser
from evaluation.across_runs.aggregate import aggregate_command
from textcore import console
from textcore.errors import exit_on_user_error


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = tool_parser(
        "aggregate", "Mean ± std over seeds of many runs: clustering (datasets as columns) and STS tables.")
    parser.add_argument("--runs", nargs="+", required=True, help="multirun folder(s) and/or run folders")
    parser.add_argument("--output", help="folder for aggregate.md/.csv/.json (default: the folder given, if only one)")
    parser.add_argument("--title", default=None, help="heading of the Markdown file")
    return parser.parse_args(argv)


@exit_on_user_error
def main(argv: Sequence[str] | None = None) -> None:
    args = parse_args(argv)
    aggregate_command(args.runs, args.output, args.title)


if __name__ == "__main__":
    console.run_cli(main)
