"""Trials a dead sweep driver left RUNNING (hydra_plugins/resumable_optuna/killed_trials.py), on real SQLite and
journal studies: which ones go back to WAITING with their number, which Optuna's heartbeat fails and queues again as
a copy, which are left alone."""
from __future__ import annotations

import json
import socket
import time

import pytest

optuna = pytest.importorskip("optuna", reason="the `sweep` extra (Optuna)")

from hydra_plugins.resumable_optuna import resumed_seed  # noqa: E402
from hydra_plugins.resumable_optuna.killed_trials import (  # noqa: E402
    DRIVER,
    HEARTBEAT,
    KILLED,
    RequeueStale,
    beating,
    driver_record,
    requeue_killed_trials,
)
from hydra_plugins.resumable_optuna.study_storage import open_storage  # noqa: E402
from runtime.run_lock import process_start  # noqa: E402
from tests.helpers.processes import dead_pid  # noqa: E402

RUNNING, WAITING, FAIL = optuna.trial.TrialState.RUNNING, optuna.trial.TrialState.WAITING, optuna.trial.TrialState.FAIL
TWO_DAYS = 2 * 86400


def storage_of(tmp_path, kind: str) -> str:
    return f"sqlite:///{tmp_path / 'optuna.db'}" if kind == "sqlite" else f"journal:{tmp_path / 'study.journal'}"


def opened(url: str, grace: float = 300.0):
    """The storage as the sweeper opens it: heartbeats every 0.05 s, stale after ``grace`` seconds."""
    return open_storage(url, 0.05, grace, RequeueStale(grace))


def study_with_running_trials(tmp_path, drivers: list[dict | None], kind: str = "sqlite"):
    """A study with one COMPLETE trial, then one RUNNING trial per entry of ``drivers`` (its ``driver`` record)."""
    url = storage_of(tmp_path, kind)
    study = optuna.create_study(study_name="s", storage=opened(url), direction="maximize")
    first = study.ask()
    first.suggest_float("x", 0.0, 1.0)
    study.tell(first, 0.5)
    for number, driver in enumerate(drivers, start=1):
        trial = study.ask()
        trial.suggest_float("x", 0.0, 1.0)
        trial.set_user_attr("run", str(tmp_path / "sweep" / str(number)))
        if driver is not None:
            study._storage.set_trial_system_attr(trial._trial_id, DRIVER, driver)
    return url, study


def load(url):
    return optuna.load_study(study_name="s", storage=opened(url))


def states(url) -> list:
    return [t.state for t in load(url).trials]


def test_a_trial_whose_driver_is_gone_runs_again_with_its_number_and_parameters(tmp_path, live_process):
    gone = {**driver_record(), "pid": dead_pid(), "process_start": "1"}
    alive = {**driver_record(), "pid": live_process.pid, "process_start": process_start(live_process.pid)}
    url, study = study_with_running_trials(tmp_path, [gone, alive, None])
    params_before = {t.number: t.params for t in study.trials}

    assert requeue_killed_trials(load(url)) == [1]
    assert states(url)[1:] == [WAITING, RUNNING, RUNNING]  # a live driver and an unknown one are left alone
    again = load(url)
    [reason] = again.trials[1].user_attrs[KILLED]
    assert reason.startswith(f"killed: its sweep driver (pid {gone['pid']} on host {socket.gethostname()}")
    popped = again.ask()  # the next ask of any driver takes it: same number, same parameters
    assert popped.number == 1 and popped.suggest_float("x", 0.0, 1.0) == params_before[1]["x"]


def make_stale(url: str, study, trial_id: int) -> None:
    """The trial's last heartbeat two days ago (the database's clock for SQLite, the driver's for a journal)."""
    if url.startswith("sqlite"):
        import sqlalchemy

        engine = sqlalchemy.create_engine(url)
        with engine.begin() as connection:
            connection.execute(sqlalchemy.text("UPDATE trial_heartbeats SET heartbeat = datetime('now', '-2 days')"))
        engine.dispose()
    else:
        study._storage.set_trial_system_attr(trial_id, HEARTBEAT, time.time() - TWO_DAYS)


@pytest.mark.parametrize("kind", ["sqlite", "journal"])
def test_a_driver_on_another_host_is_dead_once_its_heartbeat_is_older_than_the_grace(tmp_path, kind):
    elsewhere = {**driver_record(), "host": "another-node", "pid": 4242}
    url, study = study_with_running_trials(tmp_path, [elsewhere], kind)
    trial_id = study.trials[1]._trial_id
    assert requeue_killed_trials(study) == [] and states(url)[1] == RUNNING  # no heartbeat yet: nothing tells
    with beating(study._storage, [trial_id]):
        time.sleep(0.2)
    requeue_killed_trials(load(url))
    assert states(url) == [optuna.trial.TrialState.COMPLETE, RUNNING]  # fresh: that driver may well run
    make_stale(url, study, trial_id)
    assert requeue_killed_trials(load(url)) == []  # none at once with its number: Optuna's copy instead
    trials = load(url).trials
    assert [t.state for t in trials] == [optuna.trial.TrialState.COMPLETE, FAIL, WAITING]
    copy = trials[2]
    assert copy.params == trials[1].params and copy.system_attrs["failed_trial"] == 1
    assert copy.user_attrs["run"] == str(tmp_path / "sweep" / "1")  # where the sweeper runs it: its last.ckpt
    [reason] = copy.user_attrs[KILLED]
    assert "no heartbeat from its sweep driver for over 300 s" in reason and DRIVER not in copy.system_attrs
    assert HEARTBEAT not in copy.system_attrs
    popped = load(url).ask()
    assert popped.number == 2 and popped.params == trials[1].params


@pytest.mark.parametrize("kind", ["sqlite", "journal"])
def test_a_trial_whose_job_still_holds_its_folder_is_left_alone(tmp_path, live_process, kind):
    """A submitit job outlives its driver: while its run.lock names a live process, the trial is not run twice,
    neither by this host's check of the driver nor by a stale heartbeat."""
    url, study = study_with_running_trials(tmp_path, [{**driver_record(), "pid": dead_pid(), "process_start": "1"}],
                                           kind)
    trial_id = study.trials[1]._trial_id
    with beating(study._storage, [trial_id]):
        pass
    make_stale(url, study, trial_id)
    folder = tmp_path / "sweep" / "1"
    folder.mkdir(parents=True)
    (folder / "run.lock").write_text(json.dumps({"pid": live_process.pid, "host": socket.gethostname(),
                                                 "process_start": process_start(live_process.pid)}))
    assert requeue_killed_trials(load(url)) == [] and states(url)[1] == RUNNING
    live_process.kill()
    live_process.wait()
    assert requeue_killed_trials(load(url)) == [1] and states(url)[1] == WAITING


def test_a_resumed_study_seeds_its_sampler_anew_and_alike_for_the_same_study():
    assert resumed_seed(1234, 3, "/sweeps/a") == resumed_seed(1234, 3, "/sweeps/a")
    seeds = {resumed_seed(1234, n, "/sweeps/a") for n in range(1, 50)} | {resumed_seed(1234, 3, "/sweeps/b")}
    assert len(seeds) == 50 and 1234 not in seeds


def test_optunas_copy_of_a_dead_drivers_trial_runs_in_the_original_folder_of_this_sweep(tmp_path):
    """The copy keeps the original's ``run`` folder: in this driver's sweep folder it runs there (its job continues
    from the last.ckpt); a folder of another driver's sweep is not taken over (the copy runs in a folder of its own)."""
    from hydra_plugins.resumable_optuna.sweeper import ResumableOptunaSweeper

    sweeper = ResumableOptunaSweeper(sampler={"_target_": "optuna.samplers.RandomSampler"})
    sweeper.sweep_dir, sweeper.custom = tmp_path / "sweep", None
    sweeper.study = optuna.create_study(storage=opened(storage_of(tmp_path, "journal")))
    space = {"x": optuna.distributions.FloatDistribution(0.0, 1.0)}
    for original, expected in ((tmp_path / "sweep" / "1", "1"), (tmp_path / "other_driver" / "1", None)):
        sweeper.study.add_trial(optuna.create_trial(state=WAITING, params={"x": 0.5}, distributions=space,
                                                    user_attrs={"run": str(original)},
                                                    system_attrs={"failed_trial": 1}))
        copy = sweeper.study.ask()
        overrides = sweeper._configure(copy, space, {"seed": "0"})
        subdir = expected or str(copy.number)
        assert overrides == ("x=0.5", "seed=0", f"hydra.sweep.subdir={subdir}")
        assert copy.user_attrs["run"] == str(tmp_path / "sweep" / subdir)
        assert copy.user_attrs["seed"] == "0"
