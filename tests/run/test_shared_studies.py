"""Several sweep drivers on one Optuna study, as the machines of a SLURM array run them (docs/sweeps.md, "Several
machines, one study"): two processes started at once on a journal file, and on a PostgreSQL server, end with the
requested number of COMPLETE trials and no parameters drawn twice; one of them SIGKILLed in the middle of a trial and
started again, the same, with no trial left RUNNING."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers.processes import sigkill_when
from tests.helpers.resume import slow_overrides
from tests.helpers.sweeps import ROOT, cli_env
from tests.run.test_sweeps import toy_cli

pytestmark = pytest.mark.slow  # two drivers of six trials, a kill and a restart: minutes on 2 cores
optuna = pytest.importorskip("optuna", reason="the `sweep` extra (Optuna)")

N_TRIALS = 6


def driver_args(csv_path, tmp_path, storage: str, driver: int) -> list[str]:
    """One driver of the shared study: its own sweep folder, the study in ``storage``; 6 steps of ~0.2 s with a
    last.ckpt every 2, so that a trial can be killed while it trains."""
    return ["hparams_search=sccl_optuna", *toy_cli(csv_path, steps=6), "callbacks.checkpoint.every_n_steps=2",
            *slow_overrides(0.2, tmp_path / f"beacon{driver}"), f"hydra.sweeper.n_trials={N_TRIALS}",
            f"hydra.sweeper.sampler.n_startup_trials={N_TRIALS}", f"hydra.sweeper.storage={storage}",
            f"hydra.sweep.dir={tmp_path / f'driver{driver}'}"]


def start(args: list[str]) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "run.py", *args], cwd=ROOT, env=cli_env(), stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)


def finish(proc: subprocess.Popen, timeout: float = 900) -> str:
    _, err = proc.communicate(timeout=timeout)
    assert proc.returncode == 0, err[-3000:]
    return err


def kill_during_a_trial(proc: subprocess.Popen, sweep: Path, timeout: float = 600) -> None:
    """SIGKILL as soon as one of the driver's trials has written a last.ckpt (it is training)."""
    sigkill_when(proc, lambda: bool(list(sweep.glob("*/checkpoints/last.ckpt"))), f"a trial of {sweep} trained",
                 timeout)


def assert_shared_study(storage_obj) -> list:
    study = optuna.load_study(study_name="sccl", storage=storage_obj)
    states = [t.state.name for t in study.trials]
    complete = [t for t in study.trials if t.state.name == "COMPLETE"]
    # n_trials COMPLETE, at most one more: a driver may start its last trial before the other's last one finished
    assert N_TRIALS <= len(complete) <= N_TRIALS + 1, states
    assert "RUNNING" not in states, states
    # Optuna's copy of a trial whose heartbeat went stale keeps its parameters: it is not a draw
    drawn = [tuple(sorted(t.params.items())) for t in study.trials if "failed_trial" not in t.system_attrs]
    assert len(set(drawn)) == len(drawn), "parameters drawn twice"
    return study.trials


def run_two_drivers(csv_path, tmp_path, storage: str, storage_obj, kill: bool) -> list:
    drivers = [start(driver_args(csv_path, tmp_path, storage, d)) for d in (0, 1)]
    if kill:
        kill_during_a_trial(drivers[0], tmp_path / "driver0")
        study = optuna.load_study(study_name="sccl", storage=storage_obj)
        assert "RUNNING" in [t.state.name for t in study.trials]  # what the killed driver left
        drivers[0] = start(driver_args(csv_path, tmp_path, storage, 0))
    for proc in drivers:
        finish(proc)
    trials = assert_shared_study(storage_obj)
    if kill:
        assert any(t.user_attrs.get("killed") for t in trials), "the killed trial's record"
    return trials


@pytest.mark.parametrize("kill", [False, True], ids=["together", "one_killed"])
def test_two_drivers_share_a_journal_file_study(toy_corpus, tmp_path, kill):
    from hydra_plugins.resumable_optuna.study_storage import open_storage

    (tmp_path / "shared").mkdir()  # the shared file system's folder
    storage = f"journal:{tmp_path / 'shared' / 'sccl.journal'}"
    trials = run_two_drivers(toy_corpus, tmp_path, storage, open_storage(storage), kill)
    folders = {Path(t.user_attrs["run"]).parent.name for t in trials if t.state.name == "COMPLETE"}
    assert folders == {"driver0", "driver1"} or kill  # both drivers ran trials of the one study


@pytest.fixture(scope="module")
def postgres_url():
    from tests.helpers.postgres import postgres_url_or_skip

    with postgres_url_or_skip() as url:
        yield url


@pytest.mark.parametrize("kill", [False, True], ids=["together", "one_killed"])
def test_two_drivers_share_a_postgresql_study(toy_corpus, tmp_path, postgres_url, kill):
    pytest.importorskip("psycopg", reason="the `sweep` extra (psycopg)")
    import sqlalchemy

    database = f"sweep_{'killed' if kill else 'together'}"
    engine = sqlalchemy.create_engine(postgres_url, isolation_level="AUTOCOMMIT")
    with engine.connect() as connection:
        connection.execute(sqlalchemy.text(f"DROP DATABASE IF EXISTS {database}"))
        connection.execute(sqlalchemy.text(f"CREATE DATABASE {database}"))
    engine.dispose()
    url = postgres_url.rsplit("/", 1)[0] + f"/{database}"
    run_two_drivers(toy_corpus, tmp_path, url, url, kill)
