"""Drivers started at the same moment on an empty PostgreSQL database all open the study: Optuna creates its tables
unguarded, and all but one of the racing drivers fail their CREATE statements (study_storage.open_storage retries)."""
from __future__ import annotations

import subprocess
import sys

import pytest

from tests.helpers.sweeps import ROOT, cli_env

pytestmark = pytest.mark.slow  # a PostgreSQL server of its own, four processes
pytest.importorskip("optuna", reason="the `sweep` extra (Optuna)")
pytest.importorskip("psycopg", reason="the `sweep` extra (psycopg)")

OPEN = """
import sys
import optuna
from hydra_plugins.resumable_optuna.study_storage import open_storage
sys.stdin.readline()  # all start together
study = optuna.create_study(study_name="s", storage=open_storage(sys.argv[1], 30.0, 300.0), load_if_exists=True)
print(study.study_name)
"""


def test_drivers_starting_at_once_on_an_empty_database_all_open_the_study():
    from tests.helpers.postgres import postgres_url_or_skip

    with postgres_url_or_skip() as url:
        procs = [subprocess.Popen([sys.executable, "-c", OPEN, url], cwd=ROOT, env=cli_env(), stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(4)]
        for proc in procs:  # the imports done, one line lets each go
            proc.stdin.write("go\n")
            proc.stdin.flush()
        results = [proc.communicate(timeout=300) for proc in procs]
        assert [proc.returncode for proc in procs] == [0] * 4, [err[-1500:] for _, err in results]
        assert [out.strip() for out, _ in results] == ["s"] * 4
