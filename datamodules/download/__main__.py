"""Fetch the public files of the paper rows and build what the recipes read (docs/data.md, "Download").

    python tools.py download                      # everything but SCCL's views, into data/
    python tools.py download wiki nli senteval    # items or groups (see --list)
    python tools.py download sccl_views           # SCCL's contextual views (masked LMs; hours on a CPU)
    python tools.py download --list
    python tools.py download --dest <folder>      # another data folder ($PROJECT_DATA_DIR's default too)

Files already there are kept; a download broken off continues from its ``.part`` file. Without network it
stops with one line per missing file (its URL and where to put it) and exit status 2.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Sequence
from urllib.parse import urlparse

from datamodules.download import build as builders
from datamodules.download.catalogue import BY_NAME, COMMAND, GROUPS, ITEMS, Item, data_root, select
from datamodules.download.fetch import DownloadError, Offline, download
from errors import USER_ERROR_EXIT_CODE, exit_on_user_error


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def shown(path: Path) -> Path:
    """``path`` relative to the working folder when it is inside it: the lines stay short and copyable."""
    try:
        return path.resolve().relative_to(Path.cwd().resolve())
    except ValueError:
        return path


def archive_path(item: Item, dest: Path) -> Path:
    return dest / Path(item.path).parent / Path(urlparse(item.url).path).name


def listing(dest: Path) -> str:
    lines = [f"data folder: {dest}", ""]
    for item in ITEMS:
        state = "present" if (dest / item.path).exists() else "missing"
        extra = ", only when named (hours on a CPU)" if item.slow else ""
        lines.append(f"{item.name:<22} {state:<8} {item.path}  [{', '.join(item.groups)}{extra}]")
        lines.append(f"{'':<31}{item.what}; {item.source()}")
    lines += ["", f"groups: all (the default), {', '.join(GROUPS)}"]
    return "\n".join(lines)


def fetch_all(items: list[Item], dest: Path, every: float = 5.0) -> list[str]:
    """Fetch and build ``items`` in order; the lines of what could not be done (empty: all there)."""
    problems: list[str] = []
    offline: dict[str, str] = {}  # host -> why it cannot be reached: its other files are not tried
    unavailable: set[str] = set()
    for item in items:
        target = dest / item.path
        if target.exists():
            log(f"{shown(target)}: present")
            continue
        if item.url:
            host = urlparse(item.url).hostname
            saved = archive_path(item, dest) if item.archive else target
            try:
                if host in offline:
                    raise Offline(offline[host])
                if not saved.exists():  # an archive put there by hand is only unpacked
                    download(item.url, saved, item.sha256, log=log, every=every)
                if item.archive:
                    builders.unpack(saved, item, dest, log)
            except Offline as err:
                offline[host] = str(err)
                then = f" (then run `{COMMAND} {item.name}`, which unpacks it)" if item.archive else ""
                problems.append(f"missing {shown(target)}: no connection to {host} ({err}); download {item.url} "
                                f"and put it at {shown(saved)}{then}")
                unavailable.add(item.name)
            except DownloadError as err:
                problems.append(str(err))
                unavailable.add(item.name)
            continue
        lacking = [name for name in item.inputs if name in unavailable or not (dest / BY_NAME[name].path).exists()]
        if lacking:
            problems.append(f"missing {shown(target)}: built from {', '.join(lacking)}, which is missing; run "
                            f"`{COMMAND} {item.name}` again once it is there")
            unavailable.add(item.name)
            continue
        log(f"{item.path}: building ({item.build})")
        target.parent.mkdir(parents=True, exist_ok=True)
        builders.BUILDERS[item.build](item, dest, log)
        log(f"{item.path}: built")
    return problems


@exit_on_user_error
def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog=COMMAND, description=__doc__.split("\n")[0])
    parser.add_argument("names", nargs="*", help="items or groups (default: all but SCCL's views); see --list")
    parser.add_argument("--dest", type=Path, default=None, help="data folder (default: ${PROJECT_DATA_DIR} or "
                                                                 "the repository's data/)")
    parser.add_argument("--list", action="store_true", help="every item: where it goes, whether it is there")
    parser.add_argument("--progress-every", type=float, default=5.0, help="seconds between progress lines")
    args = parser.parse_args(argv)
    dest = args.dest or data_root()
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
    import console

    console.run_cli(main)
