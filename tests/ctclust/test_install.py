"""The documented install in a fresh virtual environment (docs/python.md, README "From Python"): the package imports
from another folder, the API fits the demo corpus, the two console commands answer, and the checkout's scripts stay
out of the import path. Slow: it installs every dependency (from pip's cache when it has them)."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.slow

FIT = ("from ctclust import TextClusterer, load_demo; "
       "clusterer = TextClusterer(num_clusters=8, run_dir='demo_run'); "
       "clusterer.fit(load_demo()['text']); "
       "print('sizes', sorted(clusterer.clusters_['size'].tolist()))")


def run(args, cwd, timeout=1800):
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PROJECT_ROOT", "VIRTUAL_ENV")}
    return subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)


def test_the_documented_install_gives_the_api_and_the_commands_from_any_folder(tmp_path):
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    pip = [str(venv / "bin" / "python"), "-m", "pip", "install", "--quiet"]
    # docs/python.md: torch first (the CPU build pinned by the project), then the checkout, editable
    for step in (["torch==2.13.0"], ["-e", f"{ROOT}[sweep]"]):
        done = run(pip + step, cwd=tmp_path)
        assert done.returncode == 0, done.stderr[-3000:]
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    python = str(venv / "bin" / "python")

    fitted = run([python, "-c", FIT], cwd=elsewhere)
    assert fitted.returncode == 0, fitted.stderr[-3000:]
    sizes = [line for line in fitted.stdout.splitlines() if line.startswith("sizes")]
    assert sizes and sum(eval(sizes[0].split(" ", 1)[1])) == 720  # noqa: S307 - our own printed list
    assert (elsewhere / "demo_run" / "results.json").is_file()

    for command, first in (("ctclust-train", "run is powered by Hydra"), ("ctclust-tools", "usage: ")):
        done = run([str(venv / "bin" / command), "--help"], cwd=elsewhere)
        assert done.returncode == 0 and first in done.stdout, (command, done.stdout[:500], done.stderr[-1000:])
    for name in ("run", "tools", "tests", "scripts"):  # the checkout's scripts do not shadow other packages
        done = run([python, "-c", f"import {name}"], cwd=elsewhere)
        assert done.returncode != 0 and "ModuleNotFoundError" in done.stderr, name
