"""The extension guide's worked example (docs/extending.md) runs as written: its two files are taken from
the page, written as the guide says (a method folder and a method config, nothing else), trained a few
steps, used to assign new texts with its own head, and refused on data it does not train on."""
from __future__ import annotations

import csv
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
GUIDE = ROOT / "docs" / "extending.md"
FOLDER = ROOT / "lightning_modules" / "toy_prototypes"
CONFIG = ROOT / "conf" / "method" / "toy_prototypes.yaml"


def block_after(text: str, marker: str, language: str) -> str:
    """The first ```language block after the line naming ``marker``."""
    match = re.search(re.escape(marker) + r".*?```" + language + r"\n(.*?)```", text, re.S)
    assert match, f"docs/extending.md has no {language} block after {marker}"
    return match.group(1)


def run(args, **kwargs):
    env = dict(os.environ, PROJECT_ROOT=str(ROOT), TOKENIZERS_PARALLELISM="false")
    return subprocess.run([sys.executable, *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=600,
                          **kwargs)


@pytest.fixture
def guide_method():
    assert not FOLDER.exists() and not CONFIG.exists(), "leftovers of an earlier run: remove them"
    text = GUIDE.read_text()
    try:
        FOLDER.mkdir()
        (FOLDER / "__init__.py").write_text("")
        (FOLDER / "module.py").write_text(block_after(text, "`lightning_modules/toy_prototypes/module.py`", "python"))
        CONFIG.write_text(block_after(text, "`conf/method/toy_prototypes.yaml`", "yaml"))
        yield
    finally:
        shutil.rmtree(FOLDER, ignore_errors=True)
        CONFIG.unlink(missing_ok=True)


@pytest.mark.slow
def test_the_guides_toy_method_trains_predicts_and_declares_its_data(guide_method, tmp_path):
    status = subprocess.run(["git", "status", "--porcelain", "--untracked-files=all"], cwd=ROOT, capture_output=True,
                            text=True, check=True).stdout.splitlines()
    added = {line[3:] for line in status if line.startswith("??")}
    assert {"lightning_modules/toy_prototypes/module.py", "conf/method/toy_prototypes.yaml"} <= added

    out = tmp_path / "run"
    done = run(["run.py", "method=toy_prototypes", "backbone=tiny", "trainer.max_steps=4", "batch_size=16",
                "trainer.enable_progress_bar=false", "~callbacks.progress", "print_table=false",
                "callbacks.report.plots=false", "dataset.callbacks.clustering_eval.every_n_steps=0",
                f"hydra.run.dir={out}"])
    assert done.returncode == 0, done.stderr[-3000:]
    assert (out / "results.json").exists() and (out / "checkpoints" / "last.ckpt").exists()

    new = tmp_path / "new.csv"
    new.write_text("text\nhow do I sort a list in python\nbest pasta recipe with tomatoes\n")
    done = run(["-m", "ctclust.commands.predict", "--run", str(out), "--input", str(new), "--output",
                str(tmp_path / "assigned.csv")])
    assert done.returncode == 0, done.stderr[-3000:]
    rows = list(csv.DictReader((tmp_path / "assigned.csv").open()))
    assert [r["assigned_by"] for r in rows] == ["head", "head"]
    assert all(0 <= int(r["cluster"]) < 8 for r in rows)  # the demo corpus has 8 topics

    done = run(["run.py", "method=toy_prototypes", "dataset=nli", "backbone=tiny", f"hydra.run.dir={tmp_path / 'x'}"])
    assert done.returncode == 2
    assert "method=toy_prototypes does not train on dataset=nli" in done.stderr and "demo" in done.stderr
