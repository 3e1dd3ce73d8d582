"""Where a SLURM job finds its checkpoint again after a requeue (docs/reliability.md "Preemption and resume").

A requeued job runs the same command again, and Hydra gives it a new run folder. Each run under
SLURM therefore keeps a small record in a folder that is the same for every attempt of the same
command in the same job: ``<state_dir>/<job id>/<fingerprint of the command line>/resume.json``,
naming the newest checkpoint (``last.ckpt`` of the run folder, or the ``hpc_ckpt_<n>.ckpt`` that
Lightning's requeue handler writes into this folder, which is the trainer's ``default_root_dir``).
A restarted job (``SLURM_RESTART_COUNT`` >= 1) with no ``ckpt_path`` resumes from it; a record
of a finished training (``final``) resumes as ``eval_only``. A run that ends normally removes
its folder.
"""
from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import time
from pathlib import Path

from runtime.interrupt import slurm_job_id
from textcore.atomic_files import atomic_write_text

RESUME_FILE = "resume.json"
# overrides that do not change what a run computes, so they do not change its fingerprint
_IGNORED_KEYS = ("ckpt_path", "eval_only", "trust_checkpoint", "print_table")


def command_overrides() -> list[str] | None:
    """The command line's overrides (this job's, in a multirun), or None outside a Hydra app."""
    try:
        from hydra.core.hydra_config import HydraConfig

        return list(HydraConfig.get().overrides.task)
    except (ImportError, ValueError):
        return None


def override_key(override: str) -> str:
    return override.split("=", 1)[0].lstrip("+~")


def run_fingerprint(overrides: list[str] | None, fallback: str = "") -> str:
    """12 hex digits identifying a command line (its overrides, in any order)."""
    kept = sorted(o for o in (overrides or []) if override_key(o) not in _IGNORED_KEYS)
    text = json.dumps(kept) if overrides is not None else fallback
    return hashlib.sha1(text.encode("utf-8")).hexdigest()[:12]


def under_slurm(env=None) -> bool:
    """A batch job (not an interactive shell) of SLURM, as Lightning's SLURMEnvironment sees it."""
    env = os.environ if env is None else env
    if "SLURM_NTASKS" not in env or slurm_job_id(env) is None:
        return False
    return env.get("SLURM_JOB_NAME") not in ("bash", "interactive")


class RequeueState:
    """The per-job, per-command folder and its ``resume.json``."""

    def __init__(self, folder: str | os.PathLike):
        self.dir = Path(folder)

    @classmethod
    def for_run(cls, state_dir: str | os.PathLike, fingerprint: str, env=None) -> RequeueState | None:
        """The state of this run under SLURM, or None when not in a SLURM batch job."""
        if not under_slurm(env):
            return None
        return cls(Path(state_dir) / slurm_job_id(env) / fingerprint)

    @property
    def file(self) -> Path:
        return self.dir / RESUME_FILE

    def record(self, checkpoint: str | os.PathLike, step: int, final: bool = False) -> None:
        """Point at ``checkpoint``; older ``hpc_ckpt_*.ckpt`` files of this folder are deleted."""
        checkpoint = Path(checkpoint).resolve()
        atomic_write_text(self.file, json.dumps(
            {"checkpoint": str(checkpoint), "step": int(step), "final": bool(final), "time": time.time()}, indent=2))
        for old in self.dir.glob("hpc_ckpt_*.ckpt"):
            if old.resolve() != checkpoint:
                with contextlib.suppress(OSError):
                    old.unlink()

    def read(self) -> dict | None:
        """The record when it names a checkpoint that exists, else None."""
        try:
            record = json.loads(self.file.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        if not isinstance(record, dict) or not Path(str(record.get("checkpoint", ""))).is_file():
            return None
        return record

    def clear(self) -> None:
        shutil.rmtree(self.dir, ignore_errors=True)
        with contextlib.suppress(OSError):
            self.dir.parent.rmdir()  # the job's folder, once its last run is gone
