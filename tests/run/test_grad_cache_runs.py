"""Cached gradients in real runs: every method trains with them on the tiny backbone, and gradient
accumulation, which shrinks the negatives of a step, is refused with a message naming the setting."""
from __future__ import annotations

import math

import pytest
import torch

from ctclust.training.train import train
from tests.helpers import compose_config
from tests.run.test_resume import method_overrides
from textcore.errors import ConfigError
from validation import validate


@pytest.mark.parametrize("method", ["sccl", "aecl", "simcse", "clusterns", "pairsupcon"])
def test_every_method_trains_with_cached_gradients(method, toy_corpus, tmp_path):
    overrides, steps, _, _ = method_overrides(method, tmp_path, toy_corpus)
    cfg = compose_config(overrides + ["encoder_grad_cache_tokens=40"], tmp_path / "run")
    assert cfg.method.grad_cache_tokens == 40
    results = train(cfg)
    assert results["steps"] == steps
    state = torch.load(tmp_path / "run" / "checkpoints" / "last.ckpt", weights_only=False)
    assert state["hyper_parameters"]["grad_cache_tokens"] == 40
    weights = [v for v in state["state_dict"].values() if v.is_floating_point()]
    assert all(math.isfinite(float(v.abs().sum())) for v in weights)


@pytest.mark.parametrize("method", ["sccl", "aecl", "simcse", "clusterns", "pairsupcon"])
def test_accumulation_is_refused_for_in_batch_losses(method, tmp_path):
    data = ["dataset=nli"] if method == "pairsupcon" else []
    cfg = compose_config([f"method={method}", *data, "backbone=tiny", "batch_size=32",
                          "+trainer.accumulate_grad_batches=4"], tmp_path)
    with pytest.raises(ConfigError) as err:
        validate(cfg)
    message = str(err.value)
    assert "trainer.accumulate_grad_batches=4" in message and "negatives of 32, not of 128" in message
    assert "batch_size=128" in message and "encoder_grad_cache_tokens" in message


def test_accumulation_is_allowed_without_in_batch_negatives(tmp_path):
    """PairSupCon's classification-only mode scores each pair alone: accumulation changes nothing there."""
    cfg = compose_config(["method=pairsupcon", "dataset=nli", "method.mode=classification", "backbone=tiny",
                          "+trainer.accumulate_grad_batches=4"], tmp_path)
    validate(cfg)
