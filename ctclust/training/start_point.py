"""Where a run's training starts: the ``ckpt_path`` it was given, or, without one, the checkpoint an earlier attempt
of the same run left (a SLURM job requeued: its requeue record, ``callbacks.safety.preemption``). None of these:
from scratch."""
from __future__ import annotations

import logging
from dataclasses import dataclass

from omegaconf import DictConfig

from callbacks.safety.preemption import RequeueState, restart_count

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class StartPoint:
    """``ckpt_path``: the checkpoint training continues from (None: from scratch); ``eval_only``: training had
    finished, only the evaluation is left; ``requeued_from``: the requeue record it came from."""

    ckpt_path: str | None = None
    eval_only: bool = False
    requeued_from: dict | None = None


def start_point(cfg: DictConfig, requeue_state: RequeueState | None) -> StartPoint:
    eval_only = bool(cfg.get("eval_only", False))
    if cfg.get("ckpt_path"):
        return StartPoint(str(cfg.ckpt_path), eval_only)
    if requeue_state is not None and restart_count() > 0:
        record = requeue_state.read()
        if record is not None:
            log.info("SLURM job requeued: resuming from %s (step %s)%s", record["checkpoint"], record.get("step"),
                     ", evaluation only: training had finished" if record.get("final") else "")
            return StartPoint(str(record["checkpoint"]), eval_only or bool(record.get("final")), record)
    return StartPoint(None, eval_only)
