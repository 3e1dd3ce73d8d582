"""One HTTP download into ``<file>.part``, resumed with a Range request, checked, then renamed into place."""
from __future__ import annotations

import hashlib
import http.client
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Callable

from textcore.errors import UserError

CHUNK = 1 << 20
USER_AGENT = "contrastive-text-representations data download (python urllib)"


class DownloadError(UserError):
    """A file arrived incomplete or different from the expected one; the message says what to do."""


class Offline(Exception):
    """No connection to the server (not an HTTP answer): every later download would fail the same way."""


def part_path(dest: Path) -> Path:
    return dest.with_name(dest.name + ".part")


def human(size: float) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if size < 1000 or unit == "GB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1000
    return f"{size:.1f} GB"


class Progress:
    """Whole lines (no carriage returns), so that a terminal and a log file read the same: at most one
    every ``every`` seconds, and the last one."""

    def __init__(self, label: str, total: int | None, start_bytes: int, log: Callable[[str], None],
                 every: float = 5.0):
        self.label, self.total, self.log, self.every = label, total, log, every
        self.start_bytes = start_bytes
        self.started = self.last = time.perf_counter()

    def line(self, done: int) -> str:
        elapsed = max(time.perf_counter() - self.started, 1e-9)
        rate = (done - self.start_bytes) / elapsed
        text = f"{self.label}: {human(done)}"
        if self.total:
            eta = (self.total - done) / rate if rate > 0 else 0
            text += f" / {human(self.total)} ({100 * done / self.total:.0f} %) · {human(rate)}/s · ETA " \
                    f"{int(eta // 60)}m{int(eta % 60):02d}s"
        else:
            text += f" · {human(rate)}/s"
        return text

    def update(self, done: int, final: bool = False) -> None:
        now = time.perf_counter()
        if final or now - self.last >= self.every:
            self.log(self.line(done))
            self.last = now


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(CHUNK), b""):
            digest.update(block)
    return digest.hexdigest()


def _open(url: str, offset: int, timeout: float):
    headers = {"User-Agent": USER_AGENT}
    if offset:
        headers["Range"] = f"bytes={offset}-"
    try:
        return urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=timeout)
    except urllib.error.HTTPError as err:
        if err.code == 416 and offset:  # the .part already holds the whole file
            return None
        raise DownloadError(f"{url} answered HTTP {err.code} ({err.reason}); the file may have moved: download it "
                            "by hand (see docs/data.md) and put it where this command says.") from None
    except (urllib.error.URLError, OSError) as err:
        raise Offline(str(getattr(err, "reason", err))) from None


def download(url: str, dest: Path, sha256: str | None = None, log: Callable[[str], None] = print,
             timeout: float = 30.0, every: float = 5.0) -> Path:
    """``url`` into ``dest``; what an earlier, broken download left in ``dest.part`` is kept and continued."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    part = part_path(dest)
    offset = part.stat().st_size if part.is_file() else 0
    response = _open(url, offset, timeout)
    total = None
    if response is not None:
        with response:
            resumed = offset and response.status == 206
            if offset and not resumed:
                log(f"{dest.name}: the server does not resume; starting again")
                offset = 0
            length = response.headers.get("Content-Length")
            total = offset + int(length) if length is not None else None
            if resumed:
                log(f"{dest.name}: resuming at {human(offset)}")
            progress = Progress(dest.name, total, offset, log, every)
            done = offset
            try:
                with open(part, "ab" if resumed else "wb") as out:
                    while block := response.read(CHUNK):
                        out.write(block)
                        done += len(block)
                        progress.update(done)
            except (OSError, http.client.HTTPException) as err:  # connection dropped: .part kept for the next try
                raise DownloadError(f"{url}: the connection broke after {human(done)} ({err}); run the command again "
                                    f"to resume from {part}.") from None
            progress.update(done, final=True)
    size = part.stat().st_size
    if total is not None and size != total:
        raise DownloadError(f"{url}: received {size} of the {total} bytes the server announced; run the command "
                            f"again to resume from {part}.")
    if sha256 is not None:
        got = sha256_of(part)
        if got != sha256:
            part.unlink()
            raise DownloadError(f"{dest.name} from {url} has sha256 {got}, not the expected {sha256}: the "
                                "upstream file changed or the transfer was corrupted (the download was deleted); run "
                                "the command again, and if it repeats, check the file by hand.")
        log(f"{dest.name}: sha256 checked")
    elif total is not None:
        log(f"{dest.name}: {size} bytes, the size the server announced (no checksum is known for this file)")
    part.replace(dest)
    return dest
