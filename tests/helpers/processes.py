"""A pid that names no process, for locks and studies whose recorded process is gone (the live one is the
``live_process`` fixture of tests/conftest.py), and a process killed at a chosen moment."""
from __future__ import annotations

import signal
import subprocess
import sys
import time
from typing import Callable


def sigkill_when(proc: subprocess.Popen, ready: Callable[[], bool], what: str, timeout: float = 600) -> None:
    """SIGKILL ``proc`` (started with ``stderr=PIPE``) as soon as ``ready()``; an AssertionError naming ``what``
    when it ends before, with its stderr, or when ``timeout`` seconds pass."""
    deadline = time.monotonic() + timeout
    while not ready():
        if proc.poll() is not None:
            raise AssertionError(f"it ended before {what}: {proc.stderr.read()[-3000:]}")
        assert time.monotonic() < deadline, f"no {what} in {timeout} s"
        time.sleep(0.1)
    proc.send_signal(signal.SIGKILL)
    proc.communicate(timeout=60)
    assert proc.returncode == -signal.SIGKILL


def dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()  # reaped: the pid names no process
    return proc.pid
