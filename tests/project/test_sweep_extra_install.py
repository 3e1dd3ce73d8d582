"""The `sweep` extra installs into a researcher's environment that already holds a current Optuna and SQLAlchemy 2
without changing them: no pin of Optuna below its current major, of SQLAlchemy below 2, or of alembic, and no
dependency on Hydra's Optuna sweeper plugin (whose release requires Optuna < 3)."""
from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest

from tests.helpers.sweeps import ROOT

tomllib = pytest.importorskip("tomllib", reason="Python 3.11's TOML reader")
PINNED = ("optuna", "sqlalchemy", "alembic")


def requirement_lines() -> dict[str, list[str]]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    extras = project["optional-dependencies"]
    lines = [line.split("#")[0].strip() for line in (ROOT / "requirements.txt").read_text().splitlines()]
    return {"requirements.txt": [line for line in lines if line], "pyproject.toml": [
        *project["dependencies"], *(req for reqs in extras.values() for req in reqs)]}


def test_no_file_names_the_old_sweeper_or_pins_optuna_sqlalchemy_or_alembic_low():
    for where, lines in requirement_lines().items():
        names = [re.split(r"[<>=!~\[; ]", line, maxsplit=1)[0].lower() for line in lines]
        assert "hydra-optuna-sweeper" not in names, where
        for line, name in zip(lines, names):
            if name in PINNED:
                assert "<" not in line and "==" not in line, f"{where}: {line}"
    sweep = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]["sweep"]
    assert any(req.startswith("optuna>=4") for req in sweep)


@pytest.mark.slow
def test_installing_the_sweep_extra_changes_neither_optuna_nor_sqlalchemy():
    """pip's dry run of ``pip install -e ".[sweep]"`` in this environment (which holds Optuna >= 4 and SQLAlchemy 2):
    it would install the project itself and nothing else; ``pip check`` finds no broken requirement."""
    import optuna
    import sqlalchemy

    assert int(optuna.__version__.split(".")[0]) >= 4 and int(sqlalchemy.__version__.split(".")[0]) >= 2
    proc = subprocess.run([sys.executable, "-m", "pip", "install", "--dry-run", "--no-build-isolation", "--quiet",
                           "--report", "-", "-e", f"{ROOT}[sweep]"], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    report = json.loads(proc.stdout[proc.stdout.index("{"):])
    would = {item["metadata"]["name"].lower(): item["metadata"]["version"] for item in report["install"]}
    assert list(would) == ["contrastive-text-clustering"], would
    check = subprocess.run([sys.executable, "-m", "pip", "check"], capture_output=True, text=True, timeout=300)
    assert check.returncode == 0, check.stdout[-2000:]
