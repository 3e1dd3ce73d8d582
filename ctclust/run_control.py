"""What ``run.py`` does around ``trainer.fit`` so that no work is lost (docs/reliability.md "Preemption and resume").

:class:`RunControl` decides where training resumes from (``ckpt_path``, or after a SLURM requeue
the job's record, see ``callbacks.safety.preemption``), adds the atomic checkpoint I/O plugin, runs
``eval_only=true`` (the end-of-training evaluation of a checkpoint, no training), and turns the
ways a fit can end early into an exit status and a partial ``results.json``:

- a signal (:class:`callbacks.safety.interrupt.RunInterrupted`): status ``interrupted``, the step, the
  checkpoint and the exact command that resumes; exit 128 + signal (SIGINT 130, SIGTERM 143);
- a non-finite loss or weights: status ``nonfinite_loss``; the error is reported by run.py;
- a DDP rank that died: status ``rank_died``, one message naming it and the checkpoint to resume from
  (``callbacks.safety.ranks``: the process-group timeout, the watch of the other ranks);
- the GPU out of memory: status ``out_of_memory``, one message naming the settings that set a step's memory
  (``callbacks.safety.out_of_memory``) and the checkpoint to resume from;
- a failure after the last training step (the final evaluation): status ``evaluation_failed``,
  the trained checkpoint and the command that re-runs only the evaluation (in the one error
  message, or as a note under a traceback when the error is a bug);
- any other failure: status ``failed`` and the last checkpoint.
"""
from __future__ import annotations

import contextlib
import json
import logging
import shlex
import signal
import sys
import time
from pathlib import Path

import hydra
from lightning.pytorch.callbacks import Callback
from omegaconf import DictConfig, OmegaConf, open_dict

from callbacks.safety import interrupt, ranks, run_lock
from callbacks.safety.checkpointing import (
    LastCheckpoint,
    NonFiniteWeightsError,
    atomic_write_text,
    with_atomic_checkpoint_io,
)
from callbacks.safety.nonfinite import NonFiniteLossError
from callbacks.safety.out_of_memory import is_out_of_memory, out_of_memory_error
from callbacks.safety.preemption import RequeueState, command_overrides, override_key, restart_count, run_fingerprint
from launching.hydra_callbacks import is_multirun
from textcore import run_folder
from textcore.errors import ConfigError, UserError, find_user_error

log = logging.getLogger(__name__)


class FinalEvaluationError(UserError):
    """The end-of-training evaluation failed; training finished and its checkpoint is kept."""


class EvaluateOnly(Callback):
    """Ends ``trainer.fit`` before its first training step, so that a run restored from a
    checkpoint goes straight to the end-of-training hooks (the evaluations)."""

    def on_train_start(self, trainer, pl_module) -> None:
        trainer.should_stop = True
        for callback in trainer.callbacks:  # periodic evaluations: evaluate the checkpoint anew, not from history
            if hasattr(callback, "reevaluate_final"):
                callback.reevaluate_final = True


class PhaseClock(Callback):
    """Where a run's time went, for results.json ``seconds`` (``scripts/bench/scale.py`` reads it): ``start_up``
    (from the start of the fit to the first training step: the evaluation before training, SCCL's centroids),
    ``training`` (first to last step, evaluations during training included: ``clustering.seconds`` tells
    how much they took), ``end`` (after the last step: the final evaluation, predictions.csv, the report)."""

    def __init__(self, clock=time.perf_counter):
        self.clock = clock
        self.marks: dict[str, float] = {}

    def on_fit_start(self, trainer, pl_module) -> None:
        self.marks = {"fit_start": self.clock()}

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx) -> None:
        self.marks.setdefault("first_step", self.clock())

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        self.marks["last_step"] = self.clock()

    def on_fit_end(self, trainer, pl_module) -> None:  # the last callback: after the report
        self.marks["fit_end"] = self.clock()

    def seconds(self) -> dict[str, float]:
        marks = self.marks
        order = ("fit_start", "first_step", "last_step", "fit_end")
        names = ("start_up", "training", "end")
        out = {}
        for name, (a, b) in zip(names, zip(order, order[1:])):
            if a in marks and b in marks:
                out[name] = round(marks[b] - marks[a], 1)
        if "first_step" not in marks and "fit_start" in marks and "fit_end" in marks:  # no step (eval_only)
            out["end"] = round(marks["fit_end"] - marks["fit_start"], 1)
        return out


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


class RunControl:
    """Resume point, eval-only mode, signals and partial results of one run (see module docstring).

    ``cfg`` keys: ``ckpt_path``, ``eval_only``, ``preemption.requeue_signal`` (e.g. ``USR1``; null:
    no SLURM requeue) and ``preemption.state_dir``.
    """

    def __init__(self, cfg: DictConfig, output_dir: str | Path):
        self.cfg = cfg
        self.output_dir = Path(output_dir)
        self.eval_only = bool(cfg.get("eval_only", False))
        preemption = cfg.get("preemption") or {}
        self.requeue_signal = _signal_number(preemption.get("requeue_signal", "USR1"))
        fallback = OmegaConf.to_yaml({k: v for k, v in cfg.items() if k not in ("paths", "hydra", "ckpt_path")})
        self.requeue_state = RequeueState.for_run(
            preemption.get("state_dir") or Path(cfg.paths.log_dir) / "requeue", run_fingerprint(command_overrides(),
                                                                                                fallback))
        self.ckpt_path = cfg.get("ckpt_path")
        self.requeued_from: dict | None = None
        if self.ckpt_path is None and self.requeue_state is not None and restart_count() > 0:
            record = self.requeue_state.read()
            if record is not None:
                self.requeued_from = record
                self.ckpt_path = record["checkpoint"]
                self.eval_only = self.eval_only or bool(record.get("final"))
                log.info("SLURM job requeued: resuming from %s (step %s)%s", self.ckpt_path, record.get("step"),
                         ", evaluation only: training had finished" if record.get("final") else "")
                with open_dict(cfg):  # so that the checkpoint is checked like one given on the command line
                    cfg.ckpt_path = self.ckpt_path
        if self.eval_only and not self.ckpt_path:
            raise ConfigError(
                "eval_only=true evaluates a trained checkpoint: add ckpt_path=<run>/checkpoints/last.ckpt "
                "(the checkpoint of the run to evaluate)."
            )
        self.checkpoint_callback: LastCheckpoint | None = None
        self.clock = PhaseClock()
        self.ddp_timeout_minutes, heartbeat = ranks.settings(cfg)
        self.watch = ranks.RankWatch(self.output_dir, heartbeat_seconds=heartbeat)  # the other ranks of a DDP run

    # -- building the trainer --------------------------------------------------------------------------
    def callbacks(self) -> list:
        return ([EvaluateOnly()] if self.eval_only else []) + [self.clock, self.watch]

    def trainer_kwargs(self, trainer_cfg: DictConfig) -> dict:
        """Keyword arguments for the Trainer on top of ``cfg.trainer``."""
        plugins = trainer_cfg.get("plugins")
        plugins = hydra.utils.instantiate(plugins) if plugins is not None else None
        if plugins is not None and not isinstance(plugins, (list, tuple)):
            plugins = [plugins]
        kwargs = {"plugins": with_atomic_checkpoint_io(plugins)}
        strategy = trainer_cfg.get("strategy")
        if isinstance(strategy, str) and strategy in ranks.DDP_STRATEGIES:  # with ddp.timeout_minutes
            kwargs["strategy"] = ranks.ddp_strategy(strategy, self.ddp_timeout_minutes)
        if self.requeue_state is not None:
            kwargs["default_root_dir"] = str(self.requeue_state.dir)  # Lightning's hpc_ckpt_<n>.ckpt go there
        if self.eval_only:
            kwargs.update(max_steps=-1, max_epochs=-1)  # EvaluateOnly stops before any step
        return kwargs

    # -- fitting ---------------------------------------------------------------------------------------
    def fit(self, trainer, model, datamodule) -> None:
        """``trainer.fit`` with the resume point; early ends handled as the module docstring says."""
        self.checkpoint_callback = next((cb for cb in trainer.callbacks if isinstance(cb, LastCheckpoint)), None)
        if self.checkpoint_callback is not None and self.requeue_state is not None:
            self.checkpoint_callback.on_save = self.requeue_state.record
        requeue_signal = self.requeue_signal if self.requeue_state is not None else None
        self.watch.report = lambda description: self._rank_died(trainer, description)
        with interrupt.catching_signals(requeue_signal), self.watch.observing_children():
            try:
                trainer.fit(model, datamodule=datamodule, ckpt_path=self.ckpt_path)
            except interrupt.RunInterrupted as err:
                self._interrupted(trainer, err)
            except SystemExit as err:  # Lightning's SIGTERMException (exit status 0) at an epoch end
                if type(err).__name__ != "SIGTERMException":
                    raise
                self._interrupted(trainer, interrupt.RunInterrupted(signal.SIGTERM))
            except BaseException as err:
                self._failed(trainer, err)
                raise
        if self.requeue_state is not None:
            self.requeue_state.clear()
        if trainer.is_global_zero:
            self.watch.remove_heartbeats()

    def hold_folder(self) -> contextlib.AbstractContextManager:
        """The run folder's lock (``callbacks.safety.run_lock``) for the rest of the run; refuses a folder that a
        live run writes, or that holds an earlier run without ``ckpt_path`` (a multirun's job folder is the same
        job of a resumed sweep: its unfinished attempt is replaced). Other ranks of a DDP job hold nothing."""
        if run_lock.launch_rank() != 0:
            return contextlib.nullcontext()
        lock = run_lock.FolderLock(self.output_dir)
        lock.acquire()
        found = run_lock.earlier_run(self.output_dir)
        if found and not self.ckpt_path and restart_count() > 0:  # requeued before its first checkpoint: same run
            log.info("run folder %s: the requeued job starts again over its earlier attempt (%s)", self.output_dir,
                     found)
        elif found and not self.ckpt_path:
            if not is_multirun() or run_lock.results_status(self.output_dir) == "finished":
                lock.release()
                raise run_lock.refuse_earlier_run(self.output_dir, found,
                                                  "hydra.sweep.dir" if is_multirun() else "hydra.run.dir")
            log.info("run folder %s: the unfinished earlier attempt of this job (%s) is run again", self.output_dir,
                     found)
        return lock

    def results_fields(self) -> dict:
        """Keys added to a finished run's results.json."""
        fields = {"status": "finished", "seconds": self.clock.seconds()}
        if is_multirun():  # a resumed sweep skips the job when they are the same (hydra_callbacks.finished_job)
            fields["job_overrides"] = command_overrides()
        if self.ckpt_path:
            fields["resumed_from"] = str(self.ckpt_path)
        if self.eval_only:
            fields["eval_only"] = True
        return fields

    # -- early ends ------------------------------------------------------------------------------------
    def _last_checkpoint(self) -> tuple[Path | None, int | None]:
        cb = self.checkpoint_callback
        if cb is not None and cb.last_path is not None:
            return cb.last_path, cb.last_step
        return (Path(self.ckpt_path), None) if self.ckpt_path else (None, None)

    def _interrupted(self, trainer, err: interrupt.RunInterrupted) -> None:
        name = interrupt.signal_name(err.signum)
        if interrupt.is_requeue_signal(err.signum) and not err.requeued and trainer.is_global_zero:
            err.requeued = interrupt.requeue_job()  # stopped outside training: requeue without a new checkpoint
        checkpoint, step = (err.checkpoint, err.step) if err.checkpoint is not None else self._last_checkpoint()
        finished = err.training_finished or self._training_finished(trainer) or self.eval_only
        fields = {"status": "interrupted", "signal": name, "interrupted_at_step": trainer.global_step,
                  "checkpoint": str(checkpoint) if checkpoint else None, "checkpoint_step": step,
                  "training_finished": finished, "requeued": err.requeued}
        if checkpoint is not None:
            extra = {"ckpt_path": str(Path(checkpoint).resolve())}
            if finished:
                extra["eval_only"] = "true"
            fields["resume_command"] = run_command(extra)
        if trainer.is_global_zero:
            self.write_partial_results(trainer, fields)
            if checkpoint is None:
                what = "no checkpoint was written; start the run again"
            elif finished:
                what = f"training had finished, the model is in {checkpoint}; evaluate it with: " \
                       f"{fields['resume_command']}"
            else:
                what = f"checkpoint {checkpoint} (step {step}); resume with: {fields['resume_command']}"
            if err.requeued:
                what += " (the SLURM job was requeued and resumes by itself)"
            print(f"interrupted by {name} at step {trainer.global_step}: {what}", file=sys.stderr, flush=True)
        sys.exit(err.exit_code)

    def _training_finished(self, trainer) -> bool:
        cb = self.checkpoint_callback
        return cb is not None and cb.final_step is not None and cb.final_step == trainer.global_step

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
        fields = {"status": "failed", "error": f"{type(err).__name__}: {err}",
                  "checkpoint": str(checkpoint) if checkpoint else None, "checkpoint_step": step}
        if isinstance(err, (NonFiniteLossError, NonFiniteWeightsError)):
            fields["status"] = "nonfinite_loss"
        elif self._training_finished(trainer) and not self.eval_only and checkpoint is not None:
            command = run_command({"ckpt_path": str(Path(checkpoint).resolve()), "eval_only": "true"})
            fields.update(status="evaluation_failed", eval_only_command=command)
            self.write_partial_results(trainer, fields)
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
        self.write_partial_results(trainer, fields)

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
        if trainer.is_global_zero:
            self.write_partial_results(trainer, {"status": "rank_died", "error": str(error),
                                                 "checkpoint": str(checkpoint) if checkpoint else None,
                                                 "checkpoint_step": step})
        return error

    def _out_of_memory(self, trainer, err: BaseException) -> None:
        """One message with the settings to lower (callbacks.safety.out_of_memory) instead of torch's."""
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
        if trainer.is_global_zero:
            self.write_partial_results(trainer, {"status": "out_of_memory", "error": str(error),
                                                 "checkpoint": str(checkpoint) if checkpoint else None,
                                                 "checkpoint_step": step})
        raise error from err

    def write_partial_results(self, trainer, fields: dict) -> None:
        """results.json of a run that did not finish: what is known, and ``fields``."""
        cfg = self.cfg
        results = {"method": cfg.method.name, "dataset": cfg.dataset.name, "backbone": cfg.backbone.name,
                    "seed": cfg.seed, "steps": trainer.global_step, "epochs": trainer.current_epoch,
                    "output_dir": str(self.output_dir), **fields}
        for callback in trainer.callbacks:
            if hasattr(callback, "summary") and hasattr(callback, "results_key"):
                try:
                    results[callback.results_key] = callback.summary()
                except Exception:  # noqa: BLE001 - a partial summary must not hide why the run stopped
                    continue
        try:
            atomic_write_text(self.output_dir / run_folder.RESULTS, json.dumps(results, indent=2, default=str))
        except UserError as err:
            log.warning("could not write the partial results.json: %s", err)
