"""Faults injected into runs started as processes (sweeps, DDP): callbacks a test adds with
``+callbacks.<name>._target_=tests.helpers.faults.<Class>``."""
from __future__ import annotations

import json
import os
from pathlib import Path

import torch
from lightning.pytorch.callbacks import Callback


def job_number() -> int | None:
    from hydra.core.hydra_config import HydraConfig

    return HydraConfig.get().job.get("num") if HydraConfig.initialized() else None


class FailJobs(Callback):
    """Jobs ``raise_jobs`` of a multirun raise a two-line RuntimeError at their first step (an exception that is a
    bug, not a user error); jobs ``nan_jobs`` get NaN weights after their first step, so the next loss is NaN (a
    trial whose hyper-parameters diverge)."""

    def __init__(self, raise_jobs: list[int] = (), nan_jobs: list[int] = ()):
        self.raise_jobs = set(raise_jobs)
        self.nan_jobs = set(nan_jobs)

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx) -> None:
        job = job_number()
        if job in self.raise_jobs:
            raise RuntimeError(f"injected fault in job {job}\nits second line, which tables leave out")

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        if job_number() in self.nan_jobs and trainer.global_step == 1:
            with torch.no_grad():
                for parameter in pl_module.parameters():
                    parameter.fill_(float("nan"))


class WritePids(Callback):
    """Each rank writes ``<folder>/rank<k>.pid`` when training starts, so a test can kill one."""

    def __init__(self, folder: str):
        self.folder = Path(folder)

    def on_train_start(self, trainer, pl_module) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        (self.folder / f"rank{trainer.global_rank}.pid").write_text(str(os.getpid()))


class CountEvalTexts(Callback):
    """Each rank counts the texts its module's ``eval_step`` embeds and writes ``<folder>/rank<k>.json`` at the end
    of the fit: how a test sees which process embedded what."""

    def __init__(self, folder: str):
        self.folder = Path(folder)
        self.texts = 0

    def setup(self, trainer, pl_module, stage: str) -> None:
        embed = pl_module.eval_step

        def counted(batch):
            self.texts += len(batch["index"])
            return embed(batch)

        pl_module.eval_step = counted

    def on_fit_end(self, trainer, pl_module) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        (self.folder / f"rank{trainer.global_rank}.json").write_text(json.dumps({"texts": self.texts}))


def fill_disk_for(monkeypatch, folder: Path, name: str) -> None:
    """Every write of ``folder/name`` fails with ENOSPC, as on a full disk: a direct write goes into a symlink to
    /dev/full, and the atomic writer's temporary file for that name (``.<name>.*.tmp``) writes into /dev/full."""
    import tempfile

    from textcore import atomic_files

    (folder / name).symlink_to("/dev/full")
    real = tempfile.mkstemp

    def mkstemp(suffix=None, prefix=None, dir=None, text=False):
        fd, path = real(suffix=suffix, prefix=prefix, dir=dir, text=text)
        if prefix == f".{name}.":
            full = os.open("/dev/full", os.O_WRONLY)
            os.dup2(full, fd)
            os.close(full)
        return fd, path

    monkeypatch.setattr(atomic_files.tempfile, "mkstemp", mkstemp)
