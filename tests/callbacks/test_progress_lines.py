"""Progress a person can read when the output goes to a file (SLURM, nohup, CI), and a loss-curve plot
that does not draw the smaller last batch of an epoch as a dip."""
from __future__ import annotations

import logging
import os
import re
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

import callbacks.display.progress as progress
from callbacks.display.progress import PlainProgressLines, progress_line
from evaluation.run_report.plots import partial_batch_steps
from tests.helpers import toy_overrides
from textcore.console import format_duration

ROOT = Path(__file__).resolve().parents[2]


def test_progress_line_and_durations_by_hand():
    assert format_duration(7) == "7s" and format_duration(245) == "4m05s" and format_duration(3725) == "1h02m"
    # 120 of 3000 steps at 2 steps/s: 2880 steps left = 1440 s
    expected = "step 120/3000 (4%) · epoch 2 · loss 1.2346 · 2.00 steps/s · ETA 24m00s"
    assert progress_line(120, 3000, 2, 1.23456, 2.0) == expected
    assert progress_line(5, None, 0, None, None) == "step 5 · epoch 0"


def test_bad_arguments_are_refused():
    with pytest.raises(ValueError, match="every_seconds"):
        PlainProgressLines(every_seconds=0)
    with pytest.raises(ValueError, match="when"):
        PlainProgressLines(when="sometimes")


@pytest.mark.slow
def test_a_run_writing_to_a_file_shows_progress_during_training(toy_corpus, tmp_path):
    """stdout and stderr redirected to one file, as a scheduler does: the file holds a progress line for
    each step (interval shortened for the test) before the end-of-training evaluation, and so does the
    run's own log file."""
    out, log = tmp_path / "run", tmp_path / "job.log"
    overrides = toy_overrides(toy_corpus, steps=6)  # no Rich bar: it would draw nothing in a file anyway
    env = dict(os.environ, PROJECT_ROOT=str(ROOT), TOKENIZERS_PARALLELISM="false")
    with log.open("w") as handle:
        done = subprocess.run([sys.executable, "run.py", *overrides, "callbacks.progress_lines.every_seconds=0.001",
                               f"hydra.run.dir={out}"], cwd=ROOT, env=env, stdout=handle, stderr=subprocess.STDOUT,
                              timeout=600)
    text = log.read_text()
    assert done.returncode == 0, text[-2000:]
    steps = [int(m) for m in re.findall(r"step (\d+)/6 \(\d+%\) · epoch \d+ · loss [\d.]+", text)]
    assert steps == [1, 2, 3, 4, 5, 6]
    assert "steps/s · ETA" in text
    assert text.index("step 6/6") < text.index("`Trainer.fit` stopped")  # during training, not after
    run_log = next(out.glob("*.log")).read_text()
    assert "step 3/6 (50%)" in run_log


def test_steps_with_a_smaller_batch_are_found():
    frame = pd.DataFrame({"step": [1, 2, 3, 4, 5, 6], "train/batch_size": [8, 8, 4, 8, 8, 4],
                          "train/loss": [2.0, 1.9, 1.2, 1.8, 1.7, 1.1]})
    assert partial_batch_steps(frame) == [3, 6]
    assert partial_batch_steps(frame.drop(columns="train/batch_size")) == []


def test_the_speed_is_the_median_step_so_an_evaluation_pause_does_not_make_the_eta_hours():
    from callbacks.display.progress import median_rate

    assert median_rate([0.5] * 20 + [120.0]) == 2.0  # one step that waited for an evaluation
    assert median_rate([1.0, 3.0]) == 0.5 and median_rate([2.0, 1.0, 4.0]) == 0.5
    assert median_rate([]) is None and median_rate([0.0]) is None


def progress_on_a_clock(monkeypatch, max_steps: int):
    """(clock, trainer, PlainProgressLines started on it): time is ``clock["now"]``, moved by the test."""
    from types import SimpleNamespace

    clock = {"now": 1000.0}
    monkeypatch.setattr(progress.time, "monotonic", lambda: clock["now"])
    trainer = SimpleNamespace(is_global_zero=True, global_step=0, max_steps=max_steps, max_epochs=-1,
                              num_training_batches=100, accumulate_grad_batches=1, current_epoch=0,
                              callback_metrics={})
    lines = PlainProgressLines(every_seconds=30, when="always")
    lines.on_train_start(trainer, None)
    return clock, trainer, lines


def test_lines_after_an_evaluation_keep_the_training_speed(monkeypatch, caplog):
    """Steps of 2 s, an evaluation of 200 s after step 30: the line written right after it (at step 31, whose
    window since the last line is that one step of 202 s) says 0.50 steps/s and the ETA of the 69 steps left at
    that speed (2m18s), not 0.005 steps/s and 3h52m."""
    clock, trainer, lines = progress_on_a_clock(monkeypatch, max_steps=100)
    with caplog.at_level(logging.INFO, logger=progress.log.name):
        for step in range(1, 51):
            clock["now"] += 2.0 + (200.0 if step == 31 else 0.0)  # step 31 ends after the evaluation
            trainer.global_step = step
            lines.on_train_batch_end(trainer, None, None, None, step - 1)
    written = [r.getMessage() for r in caplog.records if r.getMessage().startswith("step ")]
    after = next(line for line in written if line.startswith("step 31/"))
    assert "0.50 steps/s · ETA 2m18s" in after


def test_the_start_up_before_the_first_step_is_not_a_step(monkeypatch, caplog):
    """Three minutes of work before the first batch (the corpus embedded, KMeans for the centroids), then steps
    of 2 s: the line after step 1 says 0.50 steps/s and 1m38s for the 49 steps left, not 0.01 steps/s and
    hours (seen on a 1M-text run: "step 1/20 · 0.01 steps/s · ETA 53m31s")."""
    clock, trainer, lines = progress_on_a_clock(monkeypatch, max_steps=50)
    clock["now"] += 180.0  # the other callbacks' on_train_start
    with caplog.at_level(logging.INFO, logger=progress.log.name):
        lines.on_train_batch_start(trainer, None, None, 0)
        clock["now"] += 2.0
        trainer.global_step = 1
        lines.on_train_batch_end(trainer, None, None, None, 0)
    first = [r.getMessage() for r in caplog.records if r.getMessage().startswith("step 1/")]
    assert first and "0.50 steps/s · ETA 1m38s" in first[0], first
