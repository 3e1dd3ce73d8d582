"""Checkpoints written before the methods moved into their own folders still load and resume.

The fixture is an SCCL run on the toy corpus (tiny backbone) stopped at step 3 by the code of the flat
layout (``lightning_modules/sccl.py``; its ``module_class`` reads ``lightning_modules.sccl.SCCL``),
compressed with xz. Resumed by today's code, it must continue exactly as the same state saved under
today's class path does (an uninterrupted run of today's code is not the reference: the float rounding of
the first three steps may have changed since the fixture was written)."""
from __future__ import annotations

import lzma
import shutil
from pathlib import Path

import pytest
import torch

from ctclust.training.train import train
from lightning_modules.shared.registry import ClassPathError, import_class, same_class
from tests.helpers import compose_config
from tests.helpers.resume import assert_same_tensors, logged_rows
from tests.run.test_resume import method_overrides

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "sccl_tiny_before_method_folders_step3.ckpt.xz"


@pytest.fixture
def old_checkpoint(tmp_path) -> Path:
    path = tmp_path / "old_step3.ckpt"
    with lzma.open(FIXTURE) as src, path.open("wb") as dst:
        shutil.copyfileobj(src, dst)
    return path


@pytest.mark.parametrize("method,cls", [("sccl", "SCCL"), ("aecl", "AECL"), ("pairsupcon", "PairSupCon"),
                                        ("simcse", "SimCSE"), ("clusterns", "ClusterNS")])
def test_the_class_paths_old_checkpoints_record_name_todays_classes(method, cls):
    """The flat layout's lightning_modules/<method>.py wrote ``lightning_modules.<method>.<Class>``."""
    old = f"lightning_modules.{method}.{cls}"
    assert import_class(old) is import_class(f"lightning_modules.{method}.module.{cls}")
    assert same_class(old, f"lightning_modules.{method}.module.{cls}")


def test_module_names_no_checkpoint_records_are_not_kept():
    assert not same_class("lightning_modules.sccl.SCCL", "lightning_modules.aecl.AECL")
    for path in ("lightning_modules.base.TextRepresentationModule", "lightning_modules.nothing.Here"):
        with pytest.raises(ClassPathError, match=path):
            import_class(path)


def test_a_checkpoint_of_the_flat_layout_resumes_exactly(old_checkpoint, toy_corpus, tmp_path):
    ckpt = torch.load(old_checkpoint, weights_only=False)
    assert ckpt["module_class"] == "lightning_modules.sccl.SCCL" and ckpt["global_step"] == 3
    today = tmp_path / "today_step3.ckpt"  # the same state under today's class path
    torch.save({**ckpt, "module_class": "lightning_modules.sccl.module.SCCL"}, today)
    overrides, n, _, _ = method_overrides("sccl", tmp_path, toy_corpus)
    reference = train(compose_config(overrides + [f"ckpt_path={today}"], tmp_path / "today"))
    results = train(compose_config(overrides + [f"ckpt_path={old_checkpoint}"], tmp_path / "resumed"))
    assert results["steps"] == reference["steps"] == n
    today_rows, resumed_rows = logged_rows(tmp_path / "today"), logged_rows(tmp_path / "resumed")
    assert min(resumed_rows) >= 3  # it continued from step 3, it did not start over
    assert today_rows == resumed_rows and len(resumed_rows) >= 2
    last = Path("checkpoints") / "last.ckpt"
    assert_same_tensors(tmp_path / "today" / last, tmp_path / "resumed" / last)
    resumed = torch.load(tmp_path / "resumed" / "checkpoints" / "last.ckpt", weights_only=False)
    assert resumed["module_class"] == "lightning_modules.sccl.module.SCCL"
