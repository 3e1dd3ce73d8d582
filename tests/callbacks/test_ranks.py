"""A dead DDP rank (callbacks/safety/ranks.py): the process-group timeout the config sets, and the watch that names
the rank that died, here with real processes standing in for ranks. The run with two gloo processes, one killed,
is tests/run/test_many_processes.py (slow tier)."""
from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from datetime import timedelta

import pytest
from omegaconf import OmegaConf

from callbacks.safety import ranks
from runtime.run_lock import process_start
from tests.helpers import compose_config
from textcore.errors import ConfigError


def sleeper() -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])


def watch_of(tmp_path, peers: dict[int, subprocess.Popen], **kwargs) -> ranks.RankWatch:
    """Rank 0 of ``len(peers) + 1`` ranks; each peer a process of this host with a heartbeat saying it runs."""
    watch = ranks.RankWatch(tmp_path, poll_seconds=0.05, grace_seconds=0.2, **kwargs)
    watch.world = len(peers) + 1
    watch.peers = {rank: {"rank": rank, "pid": proc.pid, "host": socket.gethostname(),
                          "process_start": process_start(proc.pid)} for rank, proc in peers.items()}
    watch.dir.mkdir(parents=True)
    for rank in peers:
        (watch.dir / f"{rank}.json").write_text(json.dumps({"rank": rank, "state": "running"}))
    return watch


def run_thread_until_exit(watch, action, seconds: float = 10.0) -> tuple[int, float]:
    """Starts the watch's thread, does ``action``, and returns the exit code the thread asked for and how long after
    ``action`` it did."""
    codes = []
    done = threading.Event()

    def exit_(code):  # the thread returns after it
        codes.append(code)
        done.set()

    watch.exit = exit_
    watch.start()
    began = time.monotonic()
    action()
    assert done.wait(seconds), "the watch did not end the process"
    return codes[0], time.monotonic() - began


def test_the_default_timeout_is_minutes_and_reaches_the_strategy(tmp_path):
    from ctclust.training.lifecycle import RunLifecycle

    cfg = compose_config(["trainer=ddp", "trainer.accelerator=cpu"], tmp_path / "run")
    assert cfg.ddp.timeout_minutes == 10  # not Lightning's 30 minutes
    control = RunLifecycle(cfg, tmp_path / "run")
    strategy = control.trainer_kwargs(cfg.trainer)["strategy"]
    assert strategy._timeout == timedelta(minutes=10)
    short = compose_config(["trainer=ddp", "trainer.strategy=ddp_find_unused_parameters_true",
                            "ddp.timeout_minutes=0.5"], tmp_path / "run")
    strategy = RunLifecycle(short, tmp_path / "run").trainer_kwargs(short.trainer)["strategy"]
    assert strategy._timeout == timedelta(seconds=30) and strategy._ddp_kwargs["find_unused_parameters"] is True
    assert os.environ["TORCH_NCCL_ASYNC_ERROR_HANDLING"] and os.environ["TORCH_NCCL_ENABLE_MONITORING"] == "1"


@pytest.mark.parametrize("value", [0, -1, "ten", float("inf"), None])
def test_a_timeout_that_cannot_work_is_refused(value):
    with pytest.raises(ConfigError, match=r"ddp.timeout_minutes=.*must be a finite number > 0"):
        ranks.settings(OmegaConf.create({"ddp": {"timeout_minutes": value}}))


def test_lightning_still_has_the_observer_the_watch_replaces(tmp_path):
    """Lightning's launcher starts its observer through this name; the watch swaps it for its own list."""
    from lightning.pytorch.strategies.launchers import subprocess_script

    original = subprocess_script._launch_process_observer
    watch = ranks.RankWatch(tmp_path)
    with watch.observing_children():
        subprocess_script._launch_process_observer(["a child"])
    assert watch.children == ["a child"] and subprocess_script._launch_process_observer is original


def test_a_killed_child_rank_is_named_with_its_signal(tmp_path):
    child = sleeper()
    watch = watch_of(tmp_path, {1: child})
    watch.children = [child]
    reports = []
    watch.report = lambda description: reports.append(description) or ranks.RankDiedError(description)
    code, seconds = run_thread_until_exit(watch, lambda: os.kill(child.pid, signal.SIGKILL))
    assert code == 2 and seconds < 5
    assert reports == [f"rank 1 of 2 (pid {child.pid} on this host) killed by SIGKILL (the out-of-memory killer "
                       "sends it, as does a node fault)"]


def test_a_rank_of_this_host_that_is_gone_is_found_and_the_others_are_ended(tmp_path, capsys):
    """Rank 2 (not a child: started by SLURM or torchrun) dies; rank 1, a child waiting in a collective, is ended
    with this one."""
    rank1, rank2 = sleeper(), sleeper()
    watch = watch_of(tmp_path, {1: rank1, 2: rank2})
    watch.children = [rank1]

    def kill_and_reap():
        os.kill(rank2.pid, signal.SIGKILL)
        rank2.wait()

    code, _ = run_thread_until_exit(watch, kill_and_reap)
    assert code == 2 and rank1.wait(timeout=5) == -signal.SIGKILL
    [line] = capsys.readouterr().err.strip().splitlines()
    assert line.startswith(f"error: rank 2 of 3 (pid {rank2.pid} on this host) is gone")


def test_a_rank_that_finished_training_is_not_dead(tmp_path):
    peer = sleeper()
    watch = watch_of(tmp_path, {1: peer})
    (watch.dir / "1.json").write_text(json.dumps({"rank": 1, "state": "done"}))
    peer.kill()
    peer.wait()
    assert watch.dead_peers(running=True) == {}
    assert 1 in watch.dead_peers()  # but after a failed collective it is the one that left


def test_a_silent_heartbeat_is_a_dead_rank_even_where_its_process_cannot_be_seen(tmp_path):
    watch = watch_of(tmp_path, {})
    watch.world, watch.heartbeat_seconds = 2, 1.0
    watch.peers = {1: {"rank": 1, "pid": 4242, "host": "node-b", "process_start": "1"}}
    (watch.dir / "1.json").write_text(json.dumps({"rank": 1, "state": "running"}))
    watch._beat("running")
    assert watch.dead_peers(running=True) == {}
    old = time.time() - 30
    os.utime(watch.dir / "1.json", (old, old))
    [(rank, how)] = watch.dead_peers(running=True).items()
    assert rank == 1 and how.startswith("stopped responding: its heartbeat is 3") and "node fault" in how
    assert "(pid 4242 on host node-b)" in watch.describe({1: how})


def test_the_main_thread_reports_when_it_handles_the_failure(tmp_path):
    """A collective failed first (gloo notices a dead peer at once): the lifecycle reports, the watch stays quiet."""
    peer = sleeper()
    watch = watch_of(tmp_path, {1: peer})
    watch.exit = lambda code: pytest.fail("the watch ended the process although the main thread reports")
    watch.report = lambda description: pytest.fail("reported twice")
    watch.handling.set()
    watch.start()
    peer.kill()
    peer.wait()
    time.sleep(0.6)
    watch.stop()
