"""CUDA out of memory at a training step (runtime/out_of_memory.py, the lifecycle): one message with the
settings that decide a step's memory and their values in effect, injected on the CPU."""
from __future__ import annotations

import json
import warnings

import pytest
import torch

from ctclust.training.train import train
from tests.helpers import compose_config, toy_overrides
from textcore.errors import find_user_error

TORCH_MESSAGE = ("CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 23.65 GiB of which "
                 "1.06 GiB is free. Of the allocated memory 20.1 GiB is allocated by PyTorch")
ERRORS = {
    "OutOfMemoryError": lambda: torch.cuda.OutOfMemoryError(TORCH_MESSAGE),
    "RuntimeError": lambda: RuntimeError(TORCH_MESSAGE + "\nsecond line of the report"),
    "cuda_error": lambda: RuntimeError("CUDA error: out of memory\nCUDA kernel errors might be asynchronously "
                                       "reported"),
}


def fail_at_step(monkeypatch, step: int, make_error) -> None:
    """The SCCL training step ``step`` (1-based) raises ``make_error()``, as the allocator would on a GPU."""
    import lightning_modules.sccl.module as sccl

    real = sccl.SCCL.training_step

    def training_step(self, batch, batch_idx):
        if self.trainer.global_step == step - 1:
            raise make_error()
        return real(self, batch, batch_idx)

    monkeypatch.setattr(sccl.SCCL, "training_step", training_step)


def run_until_error(toy_corpus, out, extra=()) -> Exception:
    overrides = toy_overrides(toy_corpus, steps=6) + ["callbacks.checkpoint.every_n_steps=1",
                                                      "encoder_chunk_tokens=512",
                                                      "dataset.callbacks.clustering_eval.every_n_steps=100", *extra]
    with pytest.raises(Exception) as caught, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        train(compose_config(overrides, out))
    return caught.value


@pytest.mark.parametrize("kind", sorted(ERRORS))
def test_out_of_memory_names_the_settings_in_effect_and_the_checkpoint(toy_corpus, tmp_path, monkeypatch, kind):
    fail_at_step(monkeypatch, 3, ERRORS[kind])
    out = tmp_path / "run"
    error = find_user_error(run_until_error(toy_corpus, out, ["encoder_grad_cache_tokens=0"]))
    assert error is not None, "out of memory must be one message, not torch's traceback"
    message = str(error)
    assert "\n" not in message and message.startswith("the GPU ran out of memory at training step 3 (")
    assert "second line" not in message and ("Tried to allocate 2.00 GiB" in message) == (kind != "cuda_error")
    for setting in ("batch_size=8", "encoder_chunk_tokens=512", "encoder_grad_cache_tokens=0",
                    "trainer.precision=32-true"):
        assert setting in message, setting
    assert "e.g. 256" in message and "bf16-mixed" in message  # where to go from the values in effect
    checkpoint = out / "checkpoints" / "last.ckpt"
    assert f"{checkpoint} (step 2)" in message and f"ckpt_path={checkpoint.resolve()}" in message
    assert torch.load(checkpoint, map_location="cpu", weights_only=False)["global_step"] == 2
    results = json.loads((out / "results.json").read_text())
    assert results["status"] == "out_of_memory" and results["checkpoint_step"] == 2 and results["error"] == message


def test_levers_follow_the_values_in_effect():
    from omegaconf import OmegaConf

    from runtime.out_of_memory import levers

    text = levers(OmegaConf.create({"batch_size": 256, "encoder_chunk_tokens": 0, "encoder_grad_cache_tokens": 4096,
                                    "trainer": {"precision": "bf16-mixed"}}))
    assert "batch_size=256" in text and "encoder_chunk_tokens=0 (one call per batch: set a width" in text
    assert "encoder_grad_cache_tokens=4096 (cached gradients on; e.g. 2048)" in text
    assert "trainer.precision=bf16-mixed (already below float32)" in text


def test_other_errors_keep_their_traceback(toy_corpus, tmp_path, monkeypatch):
    fail_at_step(monkeypatch, 2, lambda: RuntimeError("shape mismatch in the projection"))
    error = run_until_error(toy_corpus, tmp_path / "run")
    assert find_user_error(error) is None and "shape mismatch" in str(error)
    assert json.loads((tmp_path / "run" / "results.json").read_text())["status"] == "failed"
