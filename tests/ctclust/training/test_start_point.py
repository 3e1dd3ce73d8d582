"""Where a job of a resumed multirun starts (ctclust/training/start_point.py): from the last.ckpt of its earlier
attempt when that attempt (the same overrides) was killed or stopped by a signal, from scratch otherwise."""
from __future__ import annotations

import json
import subprocess
import sys

import torch

from ctclust.training.start_point import earlier_attempt

OVERRIDES = ["seed=1", "method.lr=0.001"]


def dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def job_folder(tmp_path, step: int = 4, results: dict | None = None):
    folder = tmp_path / "sweep" / "1"
    (folder / "checkpoints").mkdir(parents=True)
    torch.save({"global_step": step, "state_dict": {}}, folder / "checkpoints" / "last.ckpt")
    if results is not None:
        (folder / "results.json").write_text(json.dumps(results))
    return folder


def killed_lock(**extra) -> dict:
    return {"pid": dead_pid(), "host": "this-host", "process_start": "1", "job_overrides": OVERRIDES[::-1], **extra}


def test_a_killed_attempt_of_the_same_job_is_continued_from_its_last_checkpoint(tmp_path):
    folder = job_folder(tmp_path)
    start = earlier_attempt(folder, OVERRIDES, killed_lock())
    assert start.ckpt_path == str(folder / "checkpoints" / "last.ckpt") and not start.eval_only
    assert start.earlier_attempt.startswith("killed: its process (pid ") and "(step 4)" in start.earlier_attempt


def test_a_killed_attempt_whose_training_had_finished_is_only_evaluated(tmp_path):
    start = earlier_attempt(job_folder(tmp_path, step=8), OVERRIDES, killed_lock(training_finished_at_step=8))
    assert start.eval_only and "(step 8)" in start.earlier_attempt


def test_an_interrupted_attempt_is_continued_and_others_start_again(tmp_path):
    interrupted = {"status": "interrupted", "signal": "SIGTERM", "interrupted_at_step": 4, "job_overrides": OVERRIDES,
                   "training_finished": False}
    start = earlier_attempt(job_folder(tmp_path, results=interrupted), OVERRIDES, None)
    assert start.earlier_attempt.startswith("stopped by SIGTERM at step 4") and not start.eval_only
    other = ["seed=2", "method.lr=0.001"]
    assert earlier_attempt(job_folder(tmp_path / "a"), other, killed_lock()) is None  # another job's attempt
    failed = {"status": "failed", "job_overrides": OVERRIDES}
    assert earlier_attempt(job_folder(tmp_path / "b", results=failed), OVERRIDES, None) is None  # a failure reruns
    finished = {"status": "finished", "job_overrides": OVERRIDES}
    assert earlier_attempt(job_folder(tmp_path / "c", results=finished), OVERRIDES, killed_lock()) is None
    assert earlier_attempt(tmp_path / "empty", OVERRIDES, killed_lock()) is None  # killed before its checkpoint
