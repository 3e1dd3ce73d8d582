"""Where a run's training starts: the ``ckpt_path`` it was given, or, without one, the checkpoint an earlier attempt
of the same run left:

- a SLURM job requeued: its requeue record (``runtime.preemption``);
- a job of a resumed multirun (the same overrides in the same job folder) whose earlier attempt was killed (its
  ``run.lock`` was left behind by a process that is gone) or stopped by a signal (its results.json says
  ``interrupted``): its ``last.ckpt``, and only the evaluation when its training had finished.

The other ranks of a DDP run take rank 0's choice, which it records in the folder's ``run.lock``. None of these:
from scratch.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

from omegaconf import DictConfig

from callbacks.safety.ranks import checkpoint_step
from runtime import run_lock
from runtime.preemption import RequeueState
from runtime.run_lock import restart_count
from textcore.run_folder import RunFileError, RunFolder

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class StartPoint:
    """``ckpt_path``: the checkpoint training continues from (None: from scratch); ``eval_only``: training had
    finished, only the evaluation is left; ``earlier_attempt``: what happened to the attempt it continues (a
    killed or interrupted job of a multirun, a requeued SLURM job), for results.json."""

    ckpt_path: str | None = None
    eval_only: bool = False
    earlier_attempt: str | None = None


def given_or_requeued(cfg: DictConfig, requeue_state: RequeueState | None) -> StartPoint:
    """``ckpt_path`` when given, else a requeued SLURM job's record, else from scratch."""
    eval_only = bool(cfg.get("eval_only", False))
    if cfg.get("ckpt_path"):
        return StartPoint(str(cfg.ckpt_path), eval_only)
    if requeue_state is not None and restart_count() > 0:
        record = requeue_state.read()
        if record is not None:
            log.info("SLURM job requeued: resuming from %s (step %s)%s", record["checkpoint"], record.get("step"),
                     ", evaluation only: training had finished" if record.get("final") else "")
            return StartPoint(str(record["checkpoint"]), eval_only or bool(record.get("final")),
                              f"SLURM job requeued (restart {restart_count()})")
    return StartPoint(None, eval_only)


def _same(recorded, overrides: list[str]) -> bool:
    return isinstance(recorded, list) and sorted(map(str, recorded)) == sorted(overrides)


def earlier_attempt(folder: Path, overrides: list[str] | None, taken_over: dict | None) -> StartPoint | None:
    """The ``last.ckpt`` of an earlier attempt of this multirun job (``overrides``) in its ``folder`` that was killed
    (``taken_over``: the lock it left, recording the same overrides) or stopped by a signal; None otherwise (a
    finished job is skipped before, a failed one runs again from scratch)."""
    run = RunFolder(folder)
    last = run.checkpoint_path()
    if overrides is None or not last.is_file():
        return None
    try:
        results = run.results() or {}
    except RunFileError:
        results = {}
    step = checkpoint_step(last)
    if taken_over and _same(taken_over.get("job_overrides"), overrides) and results.get("status") != "finished":
        why = f"killed: its process ({run_lock.gone_holder(taken_over) or run_lock.describe_holder(taken_over)})"
        finished = step is not None and taken_over.get("training_finished_at_step") == step
    elif results.get("status") == "interrupted" and _same(results.get("job_overrides"), overrides):
        why = f"stopped by {results.get('signal', 'a signal')} at step {results.get('interrupted_at_step')}"
        finished = bool(results.get("training_finished"))
    else:
        return None
    what = "evaluating its trained model" if finished else "continuing its training"
    log.warning("job folder %s: the earlier attempt of this job was %s; %s from %s (step %s)", folder, why, what,
                last, step)
    return StartPoint(str(last), finished, f"{why}; continued from its {last.name} (step {step})")


def rank_zero_choice(folder: Path) -> StartPoint | None:
    """On another rank of a DDP run: the start point rank 0 recorded in the folder's live ``run.lock``."""
    holder = run_lock.FolderLock(folder).holder()
    if not holder or not holder.get("start_checkpoint"):
        return None
    if run_lock.holder_state(holder, run_lock.this_process()) not in ("live", "unknown"):
        return None
    return StartPoint(str(holder["start_checkpoint"]), bool(holder.get("start_eval_only")),
                      holder.get("start_why"))
