"""The non-finite-loss guard reads its device flag only at logging steps, before checkpoints and at the end
(callbacks/safety/nonfinite.py): a bad loss between those still stops the run, names the first bad step, and no
weights after it are saved. (A bad loss at a logging step: tests/runtime/test_interrupt.py.)"""
from __future__ import annotations

import json

import pytest
import torch

from callbacks.safety.nonfinite import NonFiniteLossError
from ctclust.training.train import train
from tests.helpers import compose_config, toy_overrides


def poison_call(monkeypatch, bad_call: int) -> None:
    import lightning_modules.sccl.module as sccl

    real, calls = sccl.nt_xent, []

    def poisoned(*args, **kwargs):
        calls.append(1)
        loss = real(*args, **kwargs)
        return loss * float("nan") if len(calls) == bad_call else loss

    monkeypatch.setattr(sccl, "nt_xent", poisoned)


def overrides(csv, extra: list[str]) -> list[str]:
    kept = [o for o in toy_overrides(csv, steps=8) if not o.startswith("trainer.log_every_n_steps")]
    return kept + ["trainer.log_every_n_steps=4", "callbacks.checkpoint.every_n_minutes=0",
                   "dataset.callbacks.clustering_eval.every_n_steps=100"] + extra


def test_a_bad_loss_between_logging_steps_stops_at_the_next_one(toy_corpus, tmp_path, monkeypatch):
    poison_call(monkeypatch, 2)  # step 2; logging steps are 4 and 8
    out = tmp_path / "run"
    with pytest.raises(NonFiniteLossError) as stopped:
        train(compose_config(overrides(toy_corpus, ["callbacks.checkpoint.every_n_steps=0"]), out))
    assert "not finite at step 2" in str(stopped.value) and "found at step 4" in str(stopped.value)
    report = json.loads((out / "nonfinite_loss.json").read_text())
    assert report["step"] == 2 and report["detected_at_step"] == 4
    assert report["loss_terms"]["train/instance_loss"] == "nan" and len(report["batch"]["text"]) == 8
    assert not (out / "checkpoints" / "last.ckpt").exists()  # nothing saved after the bad step


def test_a_checkpoint_after_a_bad_step_is_never_written(toy_corpus, tmp_path, monkeypatch):
    poison_call(monkeypatch, 3)  # step 3, not a logging step; a checkpoint is due after every step
    out = tmp_path / "run"
    with pytest.raises(NonFiniteLossError):
        train(compose_config(overrides(toy_corpus, ["callbacks.checkpoint.every_n_steps=1"]), out))
    report = json.loads((out / "nonfinite_loss.json").read_text())
    assert report["step"] == 3 and report["last_good_checkpoint_step"] == 2
    saved = torch.load(out / "checkpoints" / "last.ckpt", weights_only=False)
    assert saved["global_step"] == 2
    assert all(torch.isfinite(v).all() for v in saved["state_dict"].values() if v.is_floating_point())
