"""``python tools.py prepare``: the command line of ``datamodules.prepare`` (what each preparation writes is
documented there and in docs/data.md, "Preparing the authors' data").

    python tools.py prepare nli-pairs --input nli_for_simcse.csv [--output nli_pairs.csv]
"""
from __future__ import annotations

from pathlib import Path
from typing import Sequence

from ctclust.commands.common import tool_parser
from datamodules import prepare
from datamodules.prepare import nli_pairs
from textcore import console
from textcore.errors import MissingFileError, exit_on_user_error


@exit_on_user_error
def main(argv: Sequence[str] | None = None):
    parser = tool_parser("prepare", prepare.__doc__)  # the library's page is the help
    sub = parser.add_subparsers(dest="command", required=True)
    n = sub.add_parser("nli-pairs", help="SimCSE's NLI triplets as PairSupCon's labelled pairs",
                       formatter_class=parser.formatter_class)
    n.add_argument("--input", required=True, type=Path)
    n.add_argument("--output", type=Path, default=None, help="default: <input folder>/nli_pairs.csv")
    n.add_argument("--encoding", default=None)
    args = parser.parse_args(argv)
    if not args.input.is_file():
        raise MissingFileError(f"--input '{args.input}' does not exist.")
    output = args.output or args.input.with_name("nli_pairs.csv")
    frame = nli_pairs(args.input, output, args.encoding)
    print(f"wrote {output} ({len(frame)} rows)")
    return frame


if __name__ == "__main__":
    console.run_cli(main)
