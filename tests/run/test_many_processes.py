"""Faults of many processes, with real processes (slow tier): a DDP rank killed in the middle of training (two CPU
processes, gloo), and two runs started on one folder. docs/reliability.md "Faults of many processes"."""
from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from tests.helpers.resume import assert_same_tensors, slow_overrides, without_timings
from tests.helpers.sweeps import cli_env
from textcore.errors import USER_ERROR_EXIT_CODE

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.slow


def start(args: list[str], folder: Path) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "run.py", *args, f"hydra.run.dir={folder}"], cwd=ROOT, env=cli_env(),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def finish(proc: subprocess.Popen, timeout: float = 300) -> subprocess.CompletedProcess:
    out, err = proc.communicate(timeout=timeout)
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def run(args: list[str], folder: Path) -> subprocess.CompletedProcess:
    return finish(start(args, folder))


def wait_for(path: Path, proc: subprocess.Popen, seconds: float = 240) -> None:
    deadline = time.monotonic() + seconds
    while not path.exists():
        assert proc.poll() is None, finish(proc).stderr[-3000:]
        assert time.monotonic() < deadline, f"{path} did not appear"
        time.sleep(0.1)


def error_line(proc: subprocess.CompletedProcess) -> str:
    assert "Traceback" not in proc.stderr, proc.stderr[-3000:]
    lines = [line for line in proc.stderr.splitlines() if line.startswith("error: ")]
    assert len(lines) == 1, proc.stderr[-3000:]
    return lines[0]


def toy_args(csv: Path, steps: int) -> list[str]:
    return ["backbone=tiny", "dataset=csv", f"data_dir={csv.parent}", f"dataset.file={csv.name}",
            "dataset.text_column=text0", "dataset.aug_columns=[text1]", "dataset.augmentation=explicit",
            f"trainer.max_steps={steps}", "trainer.max_epochs=-1",  # steps alone: the toy is one batch an epoch
            "callbacks.checkpoint.every_n_steps=1", "~callbacks.progress",
            "~callbacks.model_summary", "callbacks.report.plots=false", "print_table=false",
            "dataset.callbacks.clustering_eval.every_n_steps=0", "dataset.callbacks.clustering_eval.kmeans_n_init=2",
            "method.callbacks.centroid_init.n_init=2"]


def test_a_killed_ddp_rank_ends_the_other_with_its_name_and_the_run_resumes_exactly(toy_corpus, tmp_path):
    """Rank 1 of two gloo processes is SIGKILLed after step 3: rank 0 exits within the bound with one line naming
    rank 1 and the checkpoint; that checkpoint resumes to the same weights and optimizer state as a run that was
    never stopped."""
    ddp = ["trainer=ddp", "trainer.accelerator=cpu", "trainer.devices=2", "batch_size=6", "ddp.timeout_minutes=0.5",
           *toy_args(toy_corpus, steps=6)]
    pids, beacon = tmp_path / "pids", tmp_path / "beacon"
    pid_files = ["+callbacks.pids._target_=tests.helpers.faults.WritePids", f"+callbacks.pids.folder={pids}"]
    killed = start(ddp + slow_overrides(1.0, beacon, step=3) + pid_files, tmp_path / "killed")
    wait_for(beacon, killed)
    rank1 = int((pids / "rank1.pid").read_text())
    os.kill(rank1, signal.SIGKILL)
    began = time.monotonic()
    stopped = finish(killed, timeout=120)
    seconds = time.monotonic() - began
    assert stopped.returncode == USER_ERROR_EXIT_CODE, stopped.stderr[-3000:]
    assert seconds < 45, seconds  # the timeout (30 s) bounds it; gloo sees the closed connection at once
    line = error_line(stopped)
    checkpoint = tmp_path / "killed" / "checkpoints" / "last.ckpt"
    step = torch.load(checkpoint, map_location="cpu", weights_only=False)["global_step"]
    # the kill comes while step 3 sleeps, before its checkpoint (a checkpoint callback runs after the others and
    # asks every rank whether to stop: a collective, which fails): step 2's is the last complete one
    assert step == 2
    assert line.startswith(f"error: rank 1 of 2 (pid {rank1} on this host) killed by SIGKILL")
    assert f"The last complete checkpoint is {checkpoint} (step {step}); resume with: python run.py " in line
    assert f"ckpt_path={checkpoint.resolve()}" in line
    results = json.loads((tmp_path / "killed" / "results.json").read_text())
    assert results["status"] == "rank_died" and results["checkpoint_step"] == step

    resumed = run(ddp + [f"ckpt_path={checkpoint}"], tmp_path / "resumed")
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    whole = run(ddp, tmp_path / "whole")
    assert whole.returncode == 0, whole.stderr[-3000:]
    assert_same_tensors(tmp_path / "resumed" / "checkpoints" / "last.ckpt", tmp_path / "whole" / "checkpoints" /
                        "last.ckpt")
    final = [without_timings(json.loads((tmp_path / name / "results.json").read_text())["final"])
             for name in ("resumed", "whole")]
    assert final[0] == final[1] and final[0]["step"] == 6


def test_two_runs_on_one_folder(toy_corpus, tmp_path):
    """A second run on a folder that a live run writes is refused, naming that run; once it is killed, a new run
    there is refused too (it would replace the killed run's checkpoint), and the run resumed with ckpt_path takes
    over the stale lock."""
    folder, beacon = tmp_path / "run", tmp_path / "beacon"
    first = start(toy_args(toy_corpus, steps=40) + slow_overrides(0.5, beacon, step=2), folder)
    wait_for(beacon, first)
    second = run(toy_args(toy_corpus, steps=4) + ["seed=7"], folder)
    assert second.returncode == USER_ERROR_EXIT_CODE
    line = error_line(second)
    assert f"the run folder '{folder}' is in use by another run: pid {first.pid} on host {socket.gethostname()}" \
        in line and "hydra.run.dir=<folder>" in line
    assert "seed=7" not in (folder / ".hydra" / "overrides.yaml").read_text()  # the live run's record is its own

    first.send_signal(signal.SIGKILL)
    finish(first)
    lock = json.loads((folder / "run.lock").read_text())
    assert lock["pid"] == first.pid  # left behind by the killed run: stale
    again = run(toy_args(toy_corpus, steps=4), folder)
    assert again.returncode == USER_ERROR_EXIT_CODE
    checkpoint = folder / "checkpoints" / "last.ckpt"
    assert "holds an earlier run (checkpoints/last.ckpt)" in error_line(again)
    assert f"ckpt_path={checkpoint}" in error_line(again)

    resumed = run(toy_args(toy_corpus, steps=4) + [f"ckpt_path={checkpoint}"], folder)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert f"taking over the lock of a process that is gone: pid {first.pid}" in resumed.stderr
    results = json.loads((folder / "results.json").read_text())
    assert results["status"] == "finished" and results["resumed_from"] == str(checkpoint)
    assert not (folder / "run.lock").exists()
