"""trainer=gpu precision: bf16 where the GPU has it, fp16 where not, fp32 on request.

No GPU here: the choice is tested with a patched torch.cuda, and bf16 against fp32 training on the CPU
(Lightning's bf16-mixed autocast runs on CPU too). The GPU measurement itself is not possible here.
"""
from __future__ import annotations

import lightning as L
import pytest
import torch
from omegaconf import OmegaConf

from lightning_modules.shared.precision import gpu_precision, register_precision_resolver
from tests.helpers import compose_config
from tests.helpers.speed import LOADER


def fake_gpu(monkeypatch, capability):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: capability is not None)
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None: capability)


@pytest.mark.parametrize(
    ("capability", "expected"),
    [(None, "32-true"), ((7, 0), "16-mixed"), ((7, 5), "16-mixed"), ((8, 0), "bf16-mixed"), ((8, 6), "bf16-mixed"),
     ((9, 0), "bf16-mixed")],
)
def test_precision_follows_the_gpu(monkeypatch, capability, expected):
    fake_gpu(monkeypatch, capability)  # V100 7.0, T4 7.5, A100 8.0, RTX 3090 8.6, H100 9.0
    assert gpu_precision() == expected


@pytest.mark.parametrize(
    ("overrides", "capability", "expected"),
    [
        (["trainer=gpu"], (8, 6), "bf16-mixed"),
        (["trainer=gpu"], (7, 0), "16-mixed"),
        (["trainer=ddp"], (8, 0), "bf16-mixed"),
        (["trainer=gpu_fp32"], (8, 6), "32-true"),
        (["trainer=gpu", "trainer.precision=16-mixed"], (8, 6), "16-mixed"),
        (["trainer=cpu"], (8, 6), None),
    ],
)
def test_trainer_configs_resolve_the_precision(monkeypatch, tmp_path, overrides, capability, expected):
    register_precision_resolver()
    fake_gpu(monkeypatch, capability)
    trainer = OmegaConf.to_container(compose_config(overrides, tmp_path).trainer, resolve=True)
    assert trainer.get("precision") == expected


def _losses(toy_corpus, precision: str) -> list[float]:
    from datamodules.short_text import ShortTextDataModule
    from lightning_modules.sccl.module import SCCL

    L.seed_everything(0, verbose=False)
    dm = ShortTextDataModule(data_dir=str(toy_corpus.parent), file=toy_corpus.name, text_column="text0",
                             aug_columns=["text1"], num_clusters=3, tokenizer="tiny", batch_size=12, seed=0,
                             loader=LOADER)
    module = SCCL(num_clusters=3, backbone="tiny", lr=1e-4, chunk_tokens=64)
    module.set_centroids(torch.randn(3, module.encoder.dim, generator=torch.Generator().manual_seed(0)))
    seen: list[float] = []

    class Record(L.Callback):
        def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
            seen.append(float(outputs["loss"]))

    trainer = L.Trainer(accelerator="cpu", devices=1, precision=precision, max_steps=4, logger=False,
                        enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False,
                        callbacks=[Record()], deterministic=True)
    trainer.fit(module, datamodule=dm)
    return seen


def test_bf16_mixed_training_stays_close_to_float32(toy_corpus):
    fp32 = _losses(toy_corpus, "32-true")
    bf16 = _losses(toy_corpus, "bf16-mixed")
    assert len(fp32) == len(bf16) == 4
    for a, b in zip(fp32, bf16):
        assert b == pytest.approx(a, rel=0.03), (fp32, bf16)  # bf16 keeps 8 bits of mantissa
    assert fp32 != bf16  # autocast did run in bf16


def test_a_run_sets_the_float32_matmul_precision_it_is_given(toy_corpus, tmp_path):
    """float32_matmul_precision reaches torch before training (highest by default: true float32)."""
    from ctclust.training.train import train
    from tests.helpers import toy_overrides

    before = torch.get_float32_matmul_precision()
    try:
        torch.set_float32_matmul_precision("medium")
        train(compose_config(toy_overrides(toy_corpus, steps=1), tmp_path / "default"))
        assert torch.get_float32_matmul_precision() == "highest"
        train(compose_config(toy_overrides(toy_corpus, steps=1) + ["float32_matmul_precision=high"], tmp_path / "tf32"))
        assert torch.get_float32_matmul_precision() == "high"
    finally:
        torch.set_float32_matmul_precision(before)


def test_lightnings_tensor_core_hint_is_hidden_once_the_precision_is_chosen():
    import logging

    from textcore import console

    logger = logging.getLogger("lightning.pytorch.utilities.rank_zero")
    hint = ("You are using a CUDA device ('NVIDIA H100 80GB HBM3') that has Tensor Cores. To properly utilize them, "
            "you should set `torch.set_float32_matmul_precision('medium' | 'high')` which will trade-off ...")
    record = logger.makeRecord(logger.name, logging.INFO, __file__, 1, hint, None, None)
    other = logger.makeRecord(logger.name, logging.INFO, __file__, 1, "GPU available: True (cuda)", None, None)
    saved = list(logger.filters)
    logger.filters[:] = [f for f in saved if not isinstance(f, console.DropMatmulPrecisionHint)]  # an earlier run's
    try:
        assert logger.filter(record)  # shown until the run has chosen
        console.hide_matmul_precision_hint()
        console.hide_matmul_precision_hint()  # idempotent: one filter
        assert not logger.filter(record) and logger.filter(other)
        assert sum(isinstance(f, console.DropMatmulPrecisionHint) for f in logger.filters) == 1
    finally:
        logger.filters[:] = saved
