"""A data folder filled from the catalogue: each item fetched (or, when made from others, built) unless it is
there, and a listing of what is there. ``python tools.py download`` (``__main__``) parses its arguments and calls
:func:`fetch_all` or :func:`listing`."""
from __future__ import annotations

import sys
from pathlib import Path
from urllib.parse import urlparse

from datamodules.download import build as builders
from datamodules.download.catalogue import BY_NAME, COMMAND, GROUPS, ITEMS, Item
from datamodules.download.fetch import DownloadError, Offline, download


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def relative_to_cwd(path: Path) -> Path:
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
            log(f"{relative_to_cwd(target)}: present")
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
                problems.append(f"missing {relative_to_cwd(target)}: no connection to {host} ({err}); download "
                                f"{item.url} and put it at {relative_to_cwd(saved)}{then}")
                unavailable.add(item.name)
            except DownloadError as err:
                problems.append(str(err))
                unavailable.add(item.name)
            continue
        lacking = [name for name in item.inputs if name in unavailable or not (dest / BY_NAME[name].path).exists()]
        if lacking:
            problems.append(f"missing {relative_to_cwd(target)}: built from {', '.join(lacking)}, which is missing; "
                            f"run `{COMMAND} {item.name}` again once it is there")
            unavailable.add(item.name)
            continue
        log(f"{item.path}: building ({item.build})")
        target.parent.mkdir(parents=True, exist_ok=True)
        builders.BUILDERS[item.build](item, dest, log)
        log(f"{item.path}: built")
    return problems
