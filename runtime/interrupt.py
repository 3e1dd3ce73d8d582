"""Stopping a run on SIGINT, SIGTERM or SLURM's requeue signal without losing work
(docs/reliability.md "Preemption and resume").

While the run is training, the first signal only sets a flag: :class:`callbacks.safety.checkpointing.LastCheckpoint`
sees it at the end of the current training step, saves ``last.ckpt`` (for the requeue signal:
Lightning's SLURM handler saves ``hpc_ckpt_<n>.ckpt`` and runs ``scontrol requeue``) and raises
:class:`RunInterrupted`; the run (``ctclust.training.lifecycle``) then writes a partial ``results.json``, and
run.py exits with
128 + the signal number (SIGINT 130, SIGTERM 143, SIGUSR1 138). Saving at a step boundary, not
inside the signal handler, keeps the weights, the optimizer and the loop counters of one step
together, which an exact resume needs. Outside training (loading, the first evaluation, the final
evaluation) and at a second signal, :class:`RunInterrupted` is raised at once.
"""
from __future__ import annotations

import contextlib
import logging
import os
import re
import signal
import subprocess
import sys
import threading
from pathlib import Path

log = logging.getLogger(__name__)

DEFAULT_SIGNAL = signal.SIGTERM
PHASES = ("setup", "training", "finishing")


class RunInterrupted(Exception):
    """The run was stopped by ``signum``.

    Attributes: ``step`` (global step of the saved state, None when stopped at once),
    ``checkpoint`` (the file written, or None), ``requeued`` (SLURM requeue done),
    ``training_finished`` (the checkpoint is the trained model; only evaluation is left).
    """

    def __init__(self, signum: int, step: int | None = None, checkpoint: str | os.PathLike | None = None,
                 requeued: bool = False, training_finished: bool = False):
        self.signum = int(signum)
        self.step = step
        self.checkpoint = Path(checkpoint) if checkpoint is not None else None
        self.requeued = requeued
        self.training_finished = training_finished
        super().__init__(f"{signal_name(self.signum)} received")

    @property
    def exit_code(self) -> int:
        return exit_code(self.signum)


def signal_name(signum: int) -> str:
    try:
        return signal.Signals(signum).name
    except ValueError:
        return f"signal {signum}"


def exit_code(signum: int) -> int:
    """The shell's convention for a process ended by a signal: 128 + its number (never 0)."""
    return 128 + int(signum)


class _State:
    def __init__(self):
        self.phase = "setup"
        self.requested: int | None = None
        self.requeue_signal: int | None = None


_STATE = _State()


def pending() -> int | None:
    """The signal that asked the run to stop at the end of the current step, if any."""
    return _STATE.requested


def set_phase(phase: str) -> None:
    """``training``: a first signal waits for the end of the step; otherwise signals stop at once."""
    if phase not in PHASES:
        raise ValueError(f"phase must be one of {PHASES}, got {phase!r}")
    _STATE.phase = phase


def phase() -> str:
    return _STATE.phase


def is_requeue_signal(signum: int | None) -> bool:
    return signum is not None and _STATE.requeue_signal is not None and int(signum) == _STATE.requeue_signal


def request_stop(signum: int) -> None:
    """What the signal handler does; tests call it to simulate a signal at a chosen step."""
    if _STATE.phase == "training" and _STATE.requested is None:
        _STATE.requested = int(signum)
        again = " (press Ctrl+C again to stop at once, without saving)" if signum == signal.SIGINT else ""
        print(f"\n{signal_name(signum)} received: stopping after the current training step and saving a "
              f"checkpoint{again}", file=sys.stderr, flush=True)
        return
    raise RunInterrupted(signum)


def _handler(signum, frame) -> None:
    request_stop(signum)


@contextlib.contextmanager
def catching_signals(requeue_signal: int | None = None):
    """Handle SIGINT and SIGTERM (and ``requeue_signal``) as described in the module docstring while
    the block runs; the previous handlers come back afterwards. Only the main thread can do this;
    elsewhere the block runs with the handlers as they are."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    signals = [signal.SIGINT, signal.SIGTERM] + ([int(requeue_signal)] if requeue_signal else [])
    previous = {s: signal.getsignal(s) for s in signals}
    _STATE.__init__()
    _STATE.requeue_signal = int(requeue_signal) if requeue_signal else None
    try:
        for s in signals:
            signal.signal(s, _handler)
        yield
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler if handler is not None else signal.SIG_DFL)
        _STATE.__init__()


# -- SLURM requeue ------------------------------------------------------------------------------------
def requeue(trainer) -> Path:
    """Lightning's SLURM auto-requeue at a step boundary: ``hpc_ckpt_<n>.ckpt`` in
    ``trainer.default_root_dir`` (every rank takes part), then ``scontrol requeue`` (rank 0).
    Returns the checkpoint path."""
    path = Path(trainer._checkpoint_connector.hpc_save_path(trainer.default_root_dir))
    trainer._signal_connector._slurm_sigusr_handler_fn(_STATE.requeue_signal or signal.SIGUSR1, None)
    return path


def slurm_job_id(env=None) -> str | None:
    """``<array job>_<task>`` for an array task, else ``SLURM_JOB_ID`` (what ``scontrol requeue`` takes)."""
    env = os.environ if env is None else env
    array_job, task = env.get("SLURM_ARRAY_JOB_ID"), env.get("SLURM_ARRAY_TASK_ID")
    if array_job and task:
        return f"{array_job}_{task}"
    return env.get("SLURM_JOB_ID") or None


def requeue_job() -> bool:
    """``scontrol requeue <job>`` without a checkpoint (a stop outside training); True when it worked."""
    job = slurm_job_id()
    if job is None or not re.fullmatch(r"[0-9_\-]+", job):
        return False
    try:
        result = subprocess.call(["scontrol", "requeue", job])
    except OSError as err:
        log.warning("could not requeue SLURM job %s: %s", job, err)
        return False
    if result != 0:
        log.warning("requeuing SLURM job %s failed with exit code %s", job, result)
    return result == 0
