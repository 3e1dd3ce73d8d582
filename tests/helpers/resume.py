"""Helpers for the resume and interrupt tests: stop a run at a chosen step as a signal would, run
it again from its checkpoint, and compare every tensor and logged value with a run that never
stopped."""
from __future__ import annotations

import csv
import json
import signal
from pathlib import Path

import pytest
import torch
from lightning.pytorch.callbacks import Callback, Checkpoint

from runtime import interrupt


class StopAt(Callback):
    """Asks the run to stop during training step ``step`` (1-based), as SIGTERM arriving then would."""

    def __init__(self, step: int, signum: int = int(signal.SIGTERM)):
        self.step = step
        self.signum = signum

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx) -> None:
        if trainer.global_step == self.step - 1:
            interrupt.request_stop(self.signum)


class RecordBatches(Callback):
    """Appends (global step, epoch, batch index, first text) of every training batch to ``path``."""

    def __init__(self, path: str):
        self.path = Path(path)

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx) -> None:
        texts = next((v for k, v in batch.items() if k in ("text", "texts", "texts1")), None)
        index = batch["index"].tolist() if "index" in batch else None
        with self.path.open("a") as handle:
            handle.write(json.dumps([trainer.global_step, trainer.current_epoch, batch_idx, index or texts]) + "\n")


def stop_overrides(step: int) -> list[str]:
    return ["+callbacks.stop_at._target_=tests.helpers.resume.StopAt", f"+callbacks.stop_at.step={step}"]


def record_overrides(path: Path) -> list[str]:
    return ["+callbacks.record._target_=tests.helpers.resume.RecordBatches", f"+callbacks.record.path={path}"]


def run_interrupted(train, compose, overrides: list[str], out: Path, step: int) -> Path:
    """Runs until the simulated signal at ``step``; returns the checkpoint it left."""
    from ctclust.training.lifecycle import RunStopped

    with pytest.raises(RunStopped) as stopped:
        train(compose(overrides + stop_overrides(step), out))
    assert stopped.value.exit_code == 128 + signal.SIGTERM
    results = json.loads((out / "results.json").read_text())
    assert results["status"] == "interrupted" and results["checkpoint_step"] == step
    return Path(results["checkpoint"])


def checkpoint_tensors(path: Path) -> dict[str, torch.Tensor]:
    """Every tensor of a checkpoint's model state and optimizer state, by a flat name."""
    saved = torch.load(path, map_location="cpu", weights_only=False)
    tensors = {f"model/{k}": v for k, v in saved["state_dict"].items()}
    for i, opt in enumerate(saved.get("optimizer_states", [])):
        for pid, state in opt["state"].items():
            for k, v in state.items():
                if isinstance(v, torch.Tensor):
                    tensors[f"optimizer{i}/{pid}/{k}"] = v
    return tensors


def assert_same_tensors(a: Path, b: Path) -> None:
    ta, tb = checkpoint_tensors(a), checkpoint_tensors(b)
    assert ta.keys() == tb.keys()
    different = [k for k in ta if not torch.equal(ta[k], tb[k])]
    assert not different, f"{len(different)} tensors differ, e.g. {different[:5]}"


def logged_rows(run_dir: Path) -> dict[int, dict[str, str]]:
    """metrics.csv of a run: step -> non-empty logged values (train/* only, timings excluded)."""
    rows: dict[int, dict[str, str]] = {}
    path = next(run_dir.glob("csv/**/metrics.csv"))
    with path.open() as handle:
        for row in csv.DictReader(handle):
            values = {k: v for k, v in row.items() if k.startswith("train/") and v != ""}
            if values:
                rows.setdefault(int(row["step"]), {}).update(values)
    return rows


class Snapshot(Checkpoint):
    """Saves ``<dirpath>/step<k>.ckpt`` at the end of steps ``steps`` (where ``LastCheckpoint``
    saves: a Checkpoint callback runs after the others) and ``epoch<e>_end.ckpt`` at the end of
    epochs ``epoch_ends`` (``on_train_epoch_end``: Lightning's own end-of-epoch form)."""

    def __init__(self, dirpath: str, steps: list[int] = (), epoch_ends: list[int] = ()):
        self.dirpath = Path(dirpath)
        self.steps = set(steps)
        self.epoch_ends = set(epoch_ends)

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        if trainer.global_step in self.steps:
            trainer.save_checkpoint(self.dirpath / f"step{trainer.global_step}.ckpt")

    def on_train_epoch_end(self, trainer, pl_module) -> None:
        if trainer.current_epoch in self.epoch_ends:
            trainer.save_checkpoint(self.dirpath / f"epoch{trainer.current_epoch}_end.ckpt")


def snapshot_overrides(dirpath: Path, steps=(), epoch_ends=()) -> list[str]:
    return ["+callbacks.snapshot._target_=tests.helpers.resume.Snapshot", f"+callbacks.snapshot.dirpath={dirpath}",
            f"+callbacks.snapshot.steps=[{','.join(map(str, steps))}]",
            f"+callbacks.snapshot.epoch_ends=[{','.join(map(str, epoch_ends))}]"]


def without_timings(value):
    """A results.json value with its wall-clock entries left out, for comparing two runs."""
    if isinstance(value, dict):
        return {k: without_timings(v) for k, v in value.items()
                if not (k.endswith("seconds") or k in ("output_dir", "checkpoint", "best_checkpoint", "resumed_from",
                                                         "status"))}
    if isinstance(value, list):
        return [without_timings(v) for v in value]
    return value


class SaveAtTrainEnd(Callback):
    """``trainer.save_checkpoint(path)`` in ``on_train_end``, as Lightning's ModelCheckpoint(save_last) does."""

    def __init__(self, path: str):
        self.path = Path(path)

    def on_train_end(self, trainer, pl_module) -> None:
        trainer.save_checkpoint(self.path)


class SlowSteps(Callback):
    """Sleeps after every training step and touches ``beacon`` after step ``beacon_step``: gives a
    test that signals a run from outside a window in the middle of training."""

    def __init__(self, seconds: float, beacon: str, beacon_step: int = 2):
        self.seconds = seconds
        self.beacon = Path(beacon)
        self.beacon_step = beacon_step

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        import time

        if trainer.global_step == self.beacon_step:
            self.beacon.touch()
        time.sleep(self.seconds)


def slow_overrides(seconds: float, beacon: Path, step: int = 2) -> list[str]:
    return ["+callbacks.slow._target_=tests.helpers.resume.SlowSteps", f"+callbacks.slow.seconds={seconds}",
            f"+callbacks.slow.beacon={beacon}", f"+callbacks.slow.beacon_step={step}"]
