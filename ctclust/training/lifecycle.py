"""What happens around ``trainer.fit`` so that no work is lost (docs/reliability.md "Preemption and resume").

:class:`RunLifecycle`, a context manager around the whole run, holds the run folder's lock
(``runtime.run_lock``), decides where training starts (``start_point``), adds what the Trainer needs for
that (the atomic checkpoint I/O plugin, the DDP timeout, ``eval_only``'s early stop, SLURM's requeue folder), and
turns the ways a fit can end early into a partial results.json (``results.write_results``) and one error:

- a signal (:class:`runtime.interrupt.RunInterrupted`): status ``interrupted``, the step, the
  checkpoint and the exact command that resumes; :class:`RunStopped`, whose ``exit_code`` is 128 + the signal
  (SIGINT 130, SIGTERM 143);
- a non-finite loss or weights: status ``nonfinite_loss``; the error goes on;
- a DDP rank that died: status ``rank_died``, one message naming it and the checkpoint to resume from
  (``callbacks.safety.ranks``: the process-group timeout, the watch of the other ranks);
- the GPU out of memory: status ``out_of_memory``, one message naming the settings that set a step's memory
  (``runtime.out_of_memory``) and the checkpoint to resume from;
- a failure after the last training step (the final evaluation): status ``evaluation_failed``,
  the trained checkpoint and the command that re-runs only the evaluation (in the one error
  message, or as a note under a traceback when the error is a bug);
- any other failure: status ``failed`` and the last checkpoint.
"""
from __future__ import annotations

import logging
import shlex
import signal
import sys
import time
from pathlib import Path

import hydra
import torch
from omegaconf import DictConfig, OmegaConf, open_dict

from callbacks.safety import ranks
from callbacks.safety.checkpointing import LastCheckpoint, NonFiniteWeightsError, with_atomic_checkpoint_io
from callbacks.safety.nonfinite import NonFiniteLossError
from ctclust.training.fit_callbacks import EvaluateOnly, PhaseClock
from ctclust.training.results import FINISHED, write_results
from ctclust.training.start_point import StartPoint, earlier_attempt, given_or_requeued, rank_zero_choice
from runtime import interrupt, run_lock
from runtime.multirun import is_multirun
from runtime.out_of_memory import is_out_of_memory, out_of_memory_error
from runtime.preemption import RequeueState, command_overrides, override_key, run_fingerprint
from runtime.run_lock import restart_count
from textcore import run_folder
from textcore.errors import ConfigError, UserError, find_user_error

log = logging.getLogger(__name__)


class FinalEvaluationError(UserError):
    """The end-of-training evaluation failed; training finished and its checkpoint is kept."""


class RunStopped(Exception):
    """The run stopped on a signal; its results.json says where, and the command that resumes it. ``exit_code`` is
    the shell's for a process ended by that signal (128 + its number); the message is empty on ranks other than
    0, which print nothing."""

    def __init__(self, message: str, exit_code: int):
        super().__init__(message)
        self.exit_code = exit_code


def run_command(extra: dict[str, str]) -> str:
    """``python run.py`` with this run's overrides, ``extra`` replacing keys of the same name."""
    overrides = command_overrides() or []
    kept = [o for o in overrides if override_key(o) not in extra]
    added = [f"{key}={value}" for key, value in extra.items()]
    return " ".join(["python", "run.py"] + [shlex.quote(o) for o in kept + added])


def _signal_number(value) -> int | None:
    if value in (None, "", False):
        return None
    if isinstance(value, int):
        return value
    name = str(value).upper()
    return int(getattr(signal, name if name.startswith("SIG") else f"SIG{name}"))


class RunLifecycle:
    """One run's folder, start point, signals and ending (see the module docstring); ``with RunLifecycle(cfg,
    output_dir) as run:`` around everything the run does.

    Entering takes the run folder's lock and decides where training starts: ``cfg.ckpt_path`` is set to it, so
    that the checkpoint's checks and config_resolved.yaml see it. ``cfg`` keys read: ``ckpt_path``, ``eval_only``,
    ``preemption.requeue_signal`` (e.g. ``USR1``; null: no SLURM requeue), ``preemption.state_dir``,
    ``ddp.timeout_minutes`` and ``ddp.heartbeat_seconds``.
    """

    def __init__(self, cfg: DictConfig, output_dir: str | Path):
        self.cfg = cfg
        self.output_dir = Path(output_dir)
        self.began = time.perf_counter()
        self.known: dict = {}  # what results.json reports whatever the ending (train adds its own facts)
        preemption = cfg.get("preemption") or {}
        self.requeue_signal = _signal_number(preemption.get("requeue_signal", "USR1"))
        fallback = OmegaConf.to_yaml({k: v for k, v in cfg.items() if k not in ("paths", "hydra", "ckpt_path")})
        self.requeue_state = RequeueState.for_run(
            preemption.get("state_dir") or Path(cfg.paths.log_dir) / "requeue",
            run_fingerprint(command_overrides(), fallback))
        self.start = given_or_requeued(cfg, None)  # the given one; entering looks for an earlier attempt's
        self.trust_checkpoint = bool(cfg.get("trust_checkpoint"))  # the user's opt-in (docs/reliability.md)
        self.start_checkpoint: dict | None = None  # the start point's checkpoint as the run's checks read it
        self.lock: run_lock.FolderLock | None = None
        self.checkpoint_callback: LastCheckpoint | None = None
        self.clock = PhaseClock()
        self.fit_seconds: float | None = None
        self.ddp_timeout_minutes, heartbeat = ranks.settings(cfg)
        self.watch = ranks.RankWatch(self.output_dir, heartbeat_seconds=heartbeat)  # the other ranks of a DDP run

    # -- the run folder and where training starts --------------------------------------------------------
    def __enter__(self) -> RunLifecycle:
        start = given_or_requeued(self.cfg, self.requeue_state)
        if start.eval_only and not start.ckpt_path:
            raise ConfigError(
                f"eval_only=true evaluates a trained checkpoint: add ckpt_path=<run>/{run_folder.LAST_CHECKPOINT} "
                "(the checkpoint of the run to evaluate)."
            )
        if run_lock.launch_rank() == 0:
            start = self._hold_folder(start)
        elif start.ckpt_path is None:  # another rank of a DDP run: rank 0's choice
            start = rank_zero_choice(self.output_dir) or start
        self.start = start
        if start.ckpt_path != self.cfg.get("ckpt_path"):
            with open_dict(self.cfg):
                self.cfg.ckpt_path = start.ckpt_path
        return self

    def __exit__(self, *exc) -> None:
        if self.lock is not None:
            self.lock.release()

    def _hold_folder(self, start: StartPoint) -> StartPoint:
        """The run folder's lock for the rest of the run, and the start point it may give: a multirun job continues
        its earlier attempt that was killed or interrupted (``start_point.earlier_attempt``). Refuses a folder that a
        live run writes, or that holds an earlier run this one was not asked to continue (a multirun's job folder
        is the same job of a resumed sweep: its unfinished attempt is replaced)."""
        overrides = command_overrides() if is_multirun() else None
        lock = run_lock.FolderLock(self.output_dir, record={"job_overrides": overrides} if overrides else None)
        taken_over = lock.acquire()
        try:
            if start.ckpt_path is None and overrides is not None:
                start = earlier_attempt(self.output_dir, overrides, taken_over) or start
            found = run_lock.earlier_run(self.output_dir)
            if found and not start.ckpt_path and restart_count() > 0:  # requeued before its first checkpoint
                log.info("run folder %s: the requeued job starts again over its earlier attempt (%s)",
                         self.output_dir, found)
            elif found and not start.ckpt_path:
                if not is_multirun() or run_lock.results_status(self.output_dir) == FINISHED:
                    raise run_lock.refuse_earlier_run(self.output_dir, found,
                                                      "hydra.sweep.dir" if is_multirun() else "hydra.run.dir")
                log.info("run folder %s: the unfinished earlier attempt of this job (%s) is run again",
                         self.output_dir, found)
            if start.ckpt_path:  # the other ranks of a DDP run start where this one does
                lock.note(start_checkpoint=str(start.ckpt_path), start_eval_only=start.eval_only,
                          start_why=start.earlier_attempt)
        except BaseException:
            lock.release()
            raise
        self.lock = lock
        return start

    # -- building the trainer ------------------------------------------------------------------------------
    def callbacks(self) -> list:
        return ([EvaluateOnly()] if self.start.eval_only else []) + [self.clock, self.watch]

    def trainer_kwargs(self, trainer_cfg: DictConfig) -> dict:
        """Keyword arguments for the Trainer on top of ``cfg.trainer``."""
        plugins = trainer_cfg.get("plugins")
        plugins = hydra.utils.instantiate(plugins) if plugins is not None else None
        if plugins is not None and not isinstance(plugins, (list, tuple)):
            plugins = [plugins]
        loaded = {self.start.ckpt_path: self.start_checkpoint} \
            if self.start.ckpt_path and self.start_checkpoint is not None else None
        kwargs = {"plugins": with_atomic_checkpoint_io(plugins, self.trust_checkpoint, loaded)}
        self.start_checkpoint = None  # the plugin holds it until Lightning takes it
        strategy = trainer_cfg.get("strategy")
        if isinstance(strategy, str) and strategy in ranks.DDP_STRATEGIES:  # with ddp.timeout_minutes
            kwargs["strategy"] = ranks.ddp_strategy(strategy, self.ddp_timeout_minutes)
        if self.requeue_state is not None:
            kwargs["default_root_dir"] = str(self.requeue_state.dir)  # Lightning's hpc_ckpt_<n>.ckpt go there
        if self.start.eval_only:
            kwargs.update(max_steps=-1, max_epochs=-1)  # EvaluateOnly stops before any step
        return kwargs

    # -- fitting -------------------------------------------------------------------------------------------
    def fit(self, trainer, model, datamodule) -> None:
        """``trainer.fit`` from the start point; early ends handled as the module docstring says."""
        self.checkpoint_callback = next((cb for cb in trainer.callbacks if isinstance(cb, LastCheckpoint)), None)
        if self.checkpoint_callback is not None:
            self.checkpoint_callback.on_save = self._saved
        requeue_signal = self.requeue_signal if self.requeue_state is not None else None
        self.watch.report = lambda description: self._rank_died(trainer, description)
        began = time.perf_counter()
        with interrupt.catching_signals(requeue_signal), self.watch.observing_children():
            try:
                trainer.fit(model, datamodule=datamodule, ckpt_path=self.start.ckpt_path,
                            weights_only=not self.trust_checkpoint)
            except interrupt.RunInterrupted as err:
                raise self._interrupted(trainer, err) from None
            except SystemExit as err:  # Lightning's SIGTERMException (exit status 0) at an epoch end
                if type(err).__name__ != "SIGTERMException":
                    raise
                raise self._interrupted(trainer, interrupt.RunInterrupted(signal.SIGTERM)) from None
            except BaseException as err:
                self._failed(trainer, err)
                raise
        self.fit_seconds = time.perf_counter() - began
        if self.requeue_state is not None:
            self.requeue_state.clear()
        if trainer.is_global_zero:
            self.watch.remove_heartbeats()

    def _saved(self, path, step: int, final: bool) -> None:
        """Told about every save of last.ckpt (rank 0): a SLURM job's requeue record; the lock records the end of
        training, so that a resumed sweep that finds this job killed evaluates its checkpoint instead of training."""
        if self.requeue_state is not None:
            self.requeue_state.record(path, step, final)
        if final and self.lock is not None:
            self.lock.note(training_finished_at_step=int(step))

    def finish(self, trainer) -> dict:
        """results.json of the finished run; returns the results."""
        return write_results(self.cfg, self.output_dir, trainer, {"status": FINISHED}, self.known_facts())

    def known_facts(self) -> dict:
        """What results.json reports whatever the ending: the phases' seconds, the fit's wall time, the job's
        overrides in a multirun (a resumed sweep skips the job when they are the same:
        ``runtime.multirun.finished_job``), where training resumed from, ``eval_only``, and ``self.known``."""
        facts = {}
        if self.fit_seconds is not None:
            facts["train_wall_seconds"] = round(self.fit_seconds, 1)
        facts["torch_threads"] = torch.get_num_threads()
        if is_multirun():
            facts["job_overrides"] = command_overrides()
        if self.start.ckpt_path:
            facts["resumed_from"] = str(self.start.ckpt_path)
        if self.start.earlier_attempt:
            facts["earlier_attempt"] = self.start.earlier_attempt
        if self.start.eval_only:
            facts["eval_only"] = True
        facts.update(self.known)
        # where the time went (scripts/bench/scale.py): reading the data, then PhaseClock's phases
        facts["seconds"] = {**self.known.get("seconds", {}), **self.clock.seconds(),
                            "total": round(time.perf_counter() - self.began, 1)}
        return facts

    # -- early ends ----------------------------------------------------------------------------------------
    def _write_partial(self, trainer, ending: dict) -> None:
        if trainer.is_global_zero:
            write_results(self.cfg, self.output_dir, trainer, ending, self.known_facts())

    def _last_checkpoint(self) -> tuple[Path | None, int | None]:
        cb = self.checkpoint_callback
        if cb is not None and cb.last_path is not None:
            return cb.last_path, cb.last_step
        return (Path(self.start.ckpt_path), None) if self.start.ckpt_path else (None, None)

    def _training_finished(self, trainer) -> bool:
        cb = self.checkpoint_callback
        return cb is not None and cb.final_step is not None and cb.final_step == trainer.global_step

    def _interrupted(self, trainer, err: interrupt.RunInterrupted) -> RunStopped:
        name = interrupt.signal_name(err.signum)
        if interrupt.is_requeue_signal(err.signum) and not err.requeued and trainer.is_global_zero:
            err.requeued = interrupt.requeue_job()  # stopped outside training: requeue without a new checkpoint
        checkpoint, step = (err.checkpoint, err.step) if err.checkpoint is not None else self._last_checkpoint()
        finished = err.training_finished or self._training_finished(trainer) or self.start.eval_only
        ending = {"status": "interrupted", "signal": name, "interrupted_at_step": trainer.global_step,
                  "checkpoint": str(checkpoint) if checkpoint else None, "checkpoint_step": step,
                  "training_finished": finished, "requeued": err.requeued}
        if checkpoint is not None:
            extra = {"ckpt_path": str(Path(checkpoint).resolve())}
            if finished:
                extra["eval_only"] = "true"
            ending["resume_command"] = run_command(extra)
        if not trainer.is_global_zero:
            return RunStopped("", err.exit_code)
        self._write_partial(trainer, ending)
        if checkpoint is None:
            what = "no checkpoint was written; start the run again"
        elif finished:
            what = f"training had finished, the model is in {checkpoint}; evaluate it with: {ending['resume_command']}"
        else:
            what = f"checkpoint {checkpoint} (step {step}); resume with: {ending['resume_command']}"
        if err.requeued:
            what += " (the SLURM job was requeued and resumes by itself)"
        return RunStopped(f"interrupted by {name} at step {trainer.global_step}: {what}", err.exit_code)

    def _failed(self, trainer, err: BaseException) -> None:
        dead = self.watch.dead_peers_soon() if trainer.world_size > 1 else {}
        if dead:  # the error is this rank's view of another rank's death: name that one
            error = self._rank_died(trainer, self.watch.describe(dead))
            self.watch.stop()
            self.watch.kill_children()
            raise error from err
        if is_out_of_memory(err) is not None and not self._training_finished(trainer):
            self._out_of_memory(trainer, err)
        if not trainer.is_global_zero:
            return
        checkpoint, step = self._last_checkpoint()
        ending = {"status": "failed", "error": f"{type(err).__name__}: {err}",
                  "checkpoint": str(checkpoint) if checkpoint else None, "checkpoint_step": step}
        if isinstance(err, (NonFiniteLossError, NonFiniteWeightsError)):
            ending["status"] = "nonfinite_loss"
        elif self._training_finished(trainer) and not self.start.eval_only and checkpoint is not None:
            command = run_command({"ckpt_path": str(Path(checkpoint).resolve()), "eval_only": "true"})
            ending.update(status="evaluation_failed", eval_only_command=command)
            self._write_partial(trainer, ending)
            hint = (f"training finished and the trained model is saved in {checkpoint}; once this is fixed, "
                    f"run only the evaluation with: {command}")
            user_error = find_user_error(err)
            if user_error is not None:
                raise FinalEvaluationError(f"the end-of-training evaluation failed: {user_error} ({hint})") from err
            if hasattr(err, "add_note"):
                err.add_note(f"The end-of-training evaluation failed; {hint}")
            else:
                print(f"note: the end-of-training evaluation failed; {hint}", file=sys.stderr, flush=True)
            return
        self._write_partial(trainer, ending)

    def _rank_died(self, trainer, description: str) -> ranks.RankDiedError:
        """The one message of a run whose rank died (``description``: which, how; callbacks.safety.ranks), and its
        partial results.json (rank 0, when it is not the one that died)."""
        checkpoint, step = self._last_checkpoint()
        saved = ranks.checkpoint_step(checkpoint)  # the file's: a save may have completed since the step was known
        step = saved if saved is not None else step
        if checkpoint is not None:
            command = run_command({"ckpt_path": str(Path(checkpoint).resolve())})
            kept = f"The last complete checkpoint is {checkpoint} (step {step}); resume with: {command}"
        else:
            kept = "No checkpoint was written yet: start the run again."
        when = f"after {trainer.global_step} training step(s)" if trainer.global_step else \
            "before the first training step"
        error = ranks.RankDiedError(
            f"{description} {when}; rank {trainer.global_rank} stops too instead "
            f"of waiting for it (ddp.timeout_minutes={self.ddp_timeout_minutes:g}). {kept}")
        self._write_partial(trainer, {"status": "rank_died", "error": str(error),
                                      "checkpoint": str(checkpoint) if checkpoint else None,
                                      "checkpoint_step": step})
        return error

    def _out_of_memory(self, trainer, err: BaseException) -> None:
        """One message with the settings to lower (runtime.out_of_memory) instead of torch's."""
        checkpoint, step = self._last_checkpoint()
        where = f"at training step {trainer.global_step + 1}" if interrupt.phase() == "training" else \
            "before the first training step (the set-up or the evaluation before training)"
        if checkpoint is not None:
            command = run_command({"ckpt_path": str(Path(checkpoint).resolve())})
            kept = (f"The training so far is in {checkpoint} (step {step}); once they are changed, resume with: "
                    f"{command} (and the same batch_size: the data position is counted in batches).")
        else:
            kept = "No checkpoint was written yet: start the run again once they are changed."
        error = out_of_memory_error(is_out_of_memory(err), self.cfg, where, kept, str(trainer.precision))
        self._write_partial(trainer, {"status": "out_of_memory", "error": str(error),
                                      "checkpoint": str(checkpoint) if checkpoint else None,
                                      "checkpoint_step": step})
        raise error from err
