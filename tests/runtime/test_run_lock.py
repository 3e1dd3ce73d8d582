"""One folder, one run: the lock's decisions (runtime/run_lock.py). The two real processes on one folder
are in tests/run/test_many_processes.py (slow tier)."""
from __future__ import annotations

import json
import logging
import socket

import pytest
from omegaconf import OmegaConf

from runtime.run_lock import FolderInUseError, FolderLock, launch_rank, process_start
from tests.helpers.processes import dead_pid
from textcore.errors import USER_ERROR_EXIT_CODE


def write_lock(folder, **holder) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    record = {"host": socket.gethostname(), "started": 0.0, "slurm_job": None, "slurm_restart": 0,
              "command": "python run.py seed=1", **holder}
    (folder / "run.lock").write_text(json.dumps(record))


def test_a_folder_held_by_a_live_process_is_refused_naming_it(tmp_path, live_process):
    write_lock(tmp_path / "run", pid=live_process.pid, process_start=process_start(live_process.pid))
    with pytest.raises(FolderInUseError) as refused:
        FolderLock(tmp_path / "run").acquire()
    message = str(refused.value)
    assert f"'{tmp_path / 'run'}' is in use by another run: pid {live_process.pid} on host {socket.gethostname()}" \
        in message
    assert "python run.py seed=1" in message and "hydra.run.dir=<folder>" in message and "\n" not in message
    assert json.loads((tmp_path / "run" / "run.lock").read_text())["pid"] == live_process.pid  # left as it was


def test_a_stale_lock_is_taken_over_with_a_log_line_and_released(tmp_path, caplog):
    gone = dead_pid()
    write_lock(tmp_path / "run", pid=gone, process_start="1")
    lock = FolderLock(tmp_path / "run")
    with caplog.at_level(logging.WARNING):
        lock.acquire()
    assert f"taking over the lock of a process that is gone: pid {gone}" in caplog.text
    holder = json.loads((tmp_path / "run" / "run.lock").read_text())
    assert holder["pid"] == lock.me["pid"] and holder["host"] == socket.gethostname()
    lock.release()
    assert not (tmp_path / "run" / "run.lock").exists()


def test_a_pid_reused_by_another_process_is_stale(tmp_path, live_process):
    """The pid lives, but it is not the process that took the lock (its start time differs)."""
    write_lock(tmp_path / "run", pid=live_process.pid, process_start="-1")
    FolderLock(tmp_path / "run").acquire()


def test_another_host_is_refused_unless_it_is_an_earlier_attempt_of_this_slurm_job(tmp_path, caplog):
    write_lock(tmp_path / "run", pid=12345, process_start="7", host="node-a", slurm_job="991", slurm_restart=0)
    with pytest.raises(FolderInUseError, match=r"node-a.*cannot check whether it still runs.*delete '.*run\.lock'"):
        FolderLock(tmp_path / "run", env={"SLURM_JOB_ID": "992", "SLURM_RESTART_COUNT": "1"}).acquire()
    with pytest.raises(FolderInUseError):  # the same job, not restarted: two steps of one job on one folder
        FolderLock(tmp_path / "run", env={"SLURM_JOB_ID": "991", "SLURM_RESTART_COUNT": "0"}).acquire()
    with caplog.at_level(logging.WARNING):
        FolderLock(tmp_path / "run", env={"SLURM_JOB_ID": "991", "SLURM_RESTART_COUNT": "1"}).acquire()
    assert "an earlier attempt of this SLURM job (requeued)" in caplog.text


def test_the_same_process_may_take_its_own_lock_again(tmp_path):
    first = FolderLock(tmp_path / "run")
    first.acquire()
    FolderLock(tmp_path / "run").acquire()


@pytest.mark.parametrize("env, rank", [({}, 0), ({"LOCAL_RANK": "1"}, 1), ({"LOCAL_RANK": "0", "NODE_RANK": "2"}, 2),
                                       ({"RANK": "0", "LOCAL_RANK": "3"}, 0), ({"SLURM_PROCID": "5"}, 5)])
def test_only_the_launching_rank_holds_the_lock(env, rank):
    """Ranks of one DDP job are one run: only rank 0 (before any process group, by the launcher's variables)
    takes the lock, so the others never refuse their own job's folder."""
    assert launch_rank(env) == rank


def test_the_run_folder_check_refuses_a_live_run_before_hydra_writes_there(tmp_path, live_process, capsys):
    from launching.hydra_callbacks import OutputFolderCheck

    write_lock(tmp_path / "run", pid=live_process.pid, process_start=process_start(live_process.pid))
    config = OmegaConf.create({"hydra": {"run": {"dir": str(tmp_path / "run")}}, "ckpt_path": None})
    with pytest.raises(SystemExit) as stopped:
        OutputFolderCheck().on_run_start(config)
    assert stopped.value.code == USER_ERROR_EXIT_CODE
    [line] = capsys.readouterr().err.strip().splitlines()
    assert line.startswith("error: ") and f"pid {live_process.pid}" in line


def test_an_earlier_run_is_continued_only_with_ckpt_path(tmp_path, capsys):
    from launching.hydra_callbacks import OutputFolderCheck

    run = tmp_path / "run"
    (run / "checkpoints").mkdir(parents=True)
    (run / "checkpoints" / "last.ckpt").write_bytes(b"x")
    (run / "results.json").write_text(json.dumps({"status": "interrupted"}))
    config = OmegaConf.create({"hydra": {"run": {"dir": str(run)}}, "ckpt_path": None})
    with pytest.raises(SystemExit):
        OutputFolderCheck().on_run_start(config)
    line = capsys.readouterr().err.strip()
    assert "holds an earlier run (results.json (status interrupted) and checkpoints/last.ckpt)" in line
    assert f"ckpt_path={run / 'checkpoints' / 'last.ckpt'}" in line and "hydra.run.dir=<folder>" in line
    OutputFolderCheck().on_run_start(OmegaConf.merge(config, {"ckpt_path": str(run / "checkpoints" / "last.ckpt")}))


def test_a_second_sweep_on_the_same_folder_is_refused(tmp_path, live_process, capsys):
    from launching.hydra_callbacks import OutputFolderCheck

    write_lock(tmp_path / "sweep", pid=live_process.pid, process_start=process_start(live_process.pid))
    config = OmegaConf.create({"hydra": {"sweep": {"dir": str(tmp_path / "sweep")}}})
    with pytest.raises(SystemExit):
        OutputFolderCheck().on_multirun_start(config)
    line = capsys.readouterr().err.strip()
    assert f"the sweep folder '{tmp_path / 'sweep'}' is in use by another sweep: pid {live_process.pid}" in line
    assert "hydra.sweep.dir=<folder>" in line
    check = OutputFolderCheck()  # once it is gone, the next sweep takes the folder, and gives it back at the end
    live_process.kill()
    live_process.wait()
    check.on_multirun_start(config)
    assert json.loads((tmp_path / "sweep" / "run.lock").read_text())["pid"] != live_process.pid
    check.on_multirun_end(config)
    assert not (tmp_path / "sweep" / "run.lock").exists()
