"""Fetch the public files of the paper rows and build what the recipes read (docs/data.md, "Download").

    python tools.py download                      # everything but SCCL's views, into data/
    python tools.py download wiki nli senteval    # items or groups (see --list)
    python tools.py download sccl_views           # SCCL's contextual views (masked LMs; hours on a CPU)
    python tools.py download --list
    python tools.py download --output <folder>    # another data folder ($PROJECT_DATA_DIR's default too)

Files already there are kept; a download broken off continues from its ``.part`` file. Without network it
stops with one line per missing file (its URL and where to put it) and exit status 2.
"""
from __future__ import annotations

import sys
from pathlib import Path
from typing import Sequence

from ctclust.commands.common import tool_parser
from datamodules.download.catalogue import data_root, select
from datamodules.download.data_folder import fetch_all, listing, log
from textcore import console
from textcore.errors import USER_ERROR_EXIT_CODE, exit_on_user_error


@exit_on_user_error
def main(argv: Sequence[str] | None = None) -> int:
    parser = tool_parser("download", __doc__)
    parser.add_argument("names", nargs="*", help="items or groups (default: all but SCCL's views); see --list")
    parser.add_argument("--output", type=Path, default=None, help="the data folder to fill (default: "
                        "${PROJECT_DATA_DIR} or the repository's data/)")
    parser.add_argument("--list", action="store_true", help="every item: where it goes, whether it is there")
    parser.add_argument("--progress-every", type=float, default=5.0, help="seconds between progress lines")
    args = parser.parse_args(argv)
    dest = args.output or data_root()
    if args.list:
        print(listing(dest))
        return 0
    problems = fetch_all(select(args.names), dest, args.progress_every)
    for line in problems:
        print(f"error: {line}", file=sys.stderr, flush=True)
    if problems:
        sys.exit(USER_ERROR_EXIT_CODE)
    log(f"all there: {dest}")
    return 0



if __name__ == "__main__":
    console.run_cli(main)
