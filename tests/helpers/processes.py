"""A pid that names no process, for locks and studies whose recorded process is gone (the live one is the
``live_process`` fixture of tests/conftest.py)."""
from __future__ import annotations

import subprocess
import sys


def dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()  # reaped: the pid names no process
    return proc.pid
