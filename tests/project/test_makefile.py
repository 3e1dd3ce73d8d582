"""`make clean` removes only what is rebuilt by itself (caches); deleting the runs is `make clean-runs`, the
virtual environment `make clean-venv`: read from what `make -n` would run."""
from __future__ import annotations

import shlex
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
RUNS = {"logs", "outputs", "multirun"}  # every run folder: run.py's logs/, Hydra's outputs/ and multirun/
KEPT = RUNS | {"data", ".venv", ".gpu"}

pytestmark = pytest.mark.skipif(shutil.which("make") is None, reason="no make on this machine")


def removed(target: str) -> set[str]:
    """What the commands of ``make -n <target>`` delete: the top-level path of each ``rm``, and the names a
    ``find ... -exec rm`` deletes wherever they are."""
    done = subprocess.run(["make", "-n", target], cwd=ROOT, capture_output=True, text=True, check=True)
    paths = set()
    for line in done.stdout.splitlines():
        words = shlex.split(line)
        if words[:1] == ["rm"]:
            paths |= {Path(w).parts[0] for w in words[1:] if not w.startswith("-")}
        elif words[:1] == ["find"]:
            assert "rm" in words, f"make -n {target}: a find that deletes nothing: {line}"
            paths |= {words[i + 1] for i, w in enumerate(words) if w == "-name"}
    return paths


def test_clean_removes_caches_and_no_run():
    gone = removed("clean")
    assert {".pytest_cache", "__pycache__"} <= gone
    assert not gone & KEPT, f"make clean deletes {sorted(gone & KEPT)}: runs, data and .venv are kept"


def test_clean_runs_removes_every_run_folder():
    assert removed("clean-runs") == RUNS


def test_clean_venv_removes_the_virtual_environment_only():
    assert removed("clean-venv") == {".venv"}
