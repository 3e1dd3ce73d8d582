"""Trials a killed sweep driver left RUNNING (hydra_plugins/resumable_optuna/killed_trials.py), on a real SQLite
study: which ones go back to WAITING, which are left alone, and the heartbeat that tells about other hosts."""
from __future__ import annotations

import json
import socket

import pytest

optuna = pytest.importorskip("optuna")
pytest.importorskip("hydra_plugins.hydra_optuna_sweeper", reason="the `sweep` extra (Optuna sweeper)")

from hydra_plugins.resumable_optuna import resumed_seed  # noqa: E402
from hydra_plugins.resumable_optuna.killed_trials import (  # noqa: E402
    DRIVER,
    KILLED,
    Heartbeat,
    driver_record,
    heartbeat_ages,
    requeue_killed_trials,
)
from runtime.run_lock import process_start  # noqa: E402
from tests.helpers.processes import dead_pid  # noqa: E402

RUNNING, WAITING = optuna.trial.TrialState.RUNNING, optuna.trial.TrialState.WAITING


def study_with_running_trials(tmp_path, drivers: list[dict | None]):
    """A study with one COMPLETE trial, then one RUNNING trial per entry of ``drivers`` (its ``driver`` record)."""
    url = f"sqlite:///{tmp_path / 'optuna.db'}"
    study = optuna.create_study(study_name="s", storage=url, direction="maximize")
    first = study.ask()
    first.suggest_float("x", 0.0, 1.0)
    study.tell(first, 0.5)
    for number, driver in enumerate(drivers, start=1):
        trial = study.ask()
        trial.suggest_float("x", 0.0, 1.0)
        trial.set_user_attr("run", str(tmp_path / "sweep" / str(number)))
        if driver is not None:
            trial.set_system_attr(DRIVER, driver)
    return url, study


def states(url) -> list:
    return [t.state for t in optuna.load_study(study_name="s", storage=url).trials]


def test_a_trial_whose_driver_is_gone_runs_again_with_its_number_and_parameters(tmp_path, live_process):
    gone = {**driver_record(), "pid": dead_pid(), "process_start": "1"}
    alive = {**driver_record(), "pid": live_process.pid, "process_start": process_start(live_process.pid)}
    url, study = study_with_running_trials(tmp_path, [gone, alive, None])
    params_before = {t.number: t.params for t in study.trials}

    assert requeue_killed_trials(optuna.load_study(study_name="s", storage=url), url, 300.0) == [1]
    assert states(url)[1:] == [WAITING, RUNNING, RUNNING]  # a live driver and an unknown one are left alone
    again = optuna.load_study(study_name="s", storage=url)
    [reason] = again.trials[1].user_attrs[KILLED]
    assert reason.startswith(f"killed: its sweep driver (pid {gone['pid']} on host {socket.gethostname()}")
    popped = again.ask()  # the next ask of any driver takes it: same number, same parameters
    assert popped.number == 1 and popped.suggest_float("x", 0.0, 1.0) == params_before[1]["x"]


def test_a_driver_on_another_host_is_gone_only_when_its_heartbeat_is_older_than_the_grace(tmp_path):
    elsewhere = {**driver_record(), "host": "another-node", "pid": 4242}
    url, study = study_with_running_trials(tmp_path, [elsewhere])
    trial_id = study.trials[1]._trial_id
    assert requeue_killed_trials(study, url, 300.0) == []  # no heartbeat at all: nothing tells it is gone
    with Heartbeat(url, [trial_id], seconds=0.05):
        pass
    assert 0 <= heartbeat_ages(url, study._study_id)[trial_id] < 60
    assert requeue_killed_trials(study, url, 300.0) == []  # fresh: that driver may well run
    import sqlalchemy

    engine = sqlalchemy.create_engine(url)
    with engine.begin() as connection:  # two days old: Optuna's own check would drop the days and call it fresh
        connection.execute(sqlalchemy.text("UPDATE trial_heartbeats SET heartbeat = datetime('now', '-2 days')"))
    engine.dispose()
    assert heartbeat_ages(url, study._study_id)[trial_id] > 2 * 86400 - 60
    assert requeue_killed_trials(optuna.load_study(study_name="s", storage=url), url, 300.0) == [1]
    reason = optuna.load_study(study_name="s", storage=url).trials[1].user_attrs[KILLED][0]
    assert "no heartbeat from its sweep driver for" in reason and "grace_seconds=300" in reason


def test_a_trial_whose_job_still_holds_its_folder_is_left_alone(tmp_path, live_process):
    """A submitit job outlives its driver: while its run.lock names a live process, the trial is not run twice."""
    url, study = study_with_running_trials(tmp_path, [{**driver_record(), "pid": dead_pid(), "process_start": "1"}])
    folder = tmp_path / "sweep" / "1"
    folder.mkdir(parents=True)
    (folder / "run.lock").write_text(json.dumps({"pid": live_process.pid, "host": socket.gethostname(),
                                                 "process_start": process_start(live_process.pid)}))
    assert requeue_killed_trials(study, url, 300.0) == [] and states(url)[1] == RUNNING
    live_process.kill()
    live_process.wait()
    assert requeue_killed_trials(study, url, 300.0) == [1]


def test_a_resumed_study_seeds_its_sampler_anew_and_alike_for_the_same_study():
    assert resumed_seed(1234, 3, "/sweeps/a") == resumed_seed(1234, 3, "/sweeps/a")
    seeds = {resumed_seed(1234, n, "/sweeps/a") for n in range(1, 50)} | {resumed_seed(1234, 3, "/sweeps/b")}
    assert len(seeds) == 50 and 1234 not in seeds
