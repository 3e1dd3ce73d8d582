"""scripts/bench/profile_loop.py at smoke scale on the CPU: where an end-to-end step's time goes, beside
the raw step; what needs CUDA (the GPU timeline, the host-sync count) is skipped with a note."""
from __future__ import annotations

import gzip
import json
import time

import pytest

from tests.helpers import load_script

PROFILE = load_script("bench/profile_loop")


def test_a_nested_action_counts_for_itself_and_not_for_its_parent():
    timer = PROFILE.ExclusiveTimer()
    timer.recording = True
    with timer.profile("[LightningModule]M.optimizer_step"):
        time.sleep(0.03)
        with timer.profile("[Strategy]S.training_step"):
            time.sleep(0.06)
    assert timer.exclusive["[Strategy]S.training_step"] == pytest.approx(0.06, abs=0.02)
    assert timer.exclusive["[LightningModule]M.optimizer_step"] == pytest.approx(0.03, abs=0.02)
    timer.recording = False
    with timer.profile("collation"):
        pass
    assert "collation" not in timer.exclusive  # outside the window: not recorded
    assert [PROFILE.category(a) for a in ("[_TrainingEpochLoop].train_dataloader_next",
                                          "[Strategy]SingleDeviceStrategy.backward",
                                          "[LightningModule]SCCL.optimizer_step",
                                          "[Callback]LastCheckpoint.on_train_batch_end", "logging: self.log",
                                          "[LightningModule]SCCL.transfer_batch_to_device")] == [
        "data loading", "backward", "optimizer", "callbacks and hooks", "logging", "transfer to device"]


def test_tiny_profile_on_the_cpu_attributes_the_step_and_skips_what_needs_cuda(tmp_path, short_text_dir):
    data = tmp_path / "data"
    data.mkdir()
    lines = (short_text_dir / "stackoverflow.csv").read_text(encoding="utf-8").splitlines()[:121]
    (data / "stackoverflow.csv").write_text("\n".join(lines) + "\n", encoding="utf-8")
    out = tmp_path / "out"
    record = PROFILE.main(["--tiny", "--device", "cpu", "--precision", "fp32", "--methods", "sccl", "--steps", "3",
                           "--warmup", "1", "--trace-steps", "1", "--count-syncs", "--data-dir", str(data),
                           "--out", str(out)])
    [row] = record["rows"]
    parts = row["categories_ms"]
    # the actions a step is made of were all seen, and none counted twice: what is left for "other" is not negative
    for name in ("collation", "training_step (forward, loss)", "backward", "optimizer", "logging",
                 "callbacks and hooks"):
        assert parts[name] > 0, name
    assert parts["other (Python, Lightning)"] >= -0.5
    assert sum(parts.values()) == pytest.approx(row["ms_per_step"], rel=1e-6)
    assert row["raw_ms"] > 0 and row["gpu_busy_share"] is None and row["top_ops"]
    trace = json.loads(gzip.open(out / row["trace"]).read())
    names = {event.get("name") for event in trace["traceEvents"]}
    assert "[Strategy]SingleDeviceStrategy.backward" in names  # Lightning's actions marked in the trace
    text = (out / "profile.md").read_text()
    assert "| sccl | fp32 |" in text and "no CUDA device: the GPU timeline" in text
    assert "host syncs: skipped, CUDA reports them only on a GPU" in text
    assert json.loads((out / "profile.json").read_text())["rows"][0]["method"] == "sccl"


def test_the_sync_count_runs_compose_for_every_method(tmp_path, monkeypatch):
    """The runs --count-syncs makes on a GPU (one per method, AECL's three stages), composed here with Hydra."""
    import argparse

    import torch
    from hydra import compose, initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra

    from tests.helpers import CONF

    args = argparse.Namespace(tiny=True, sync_steps=12)
    runs = PROFILE.sync_runs(args, torch.device("cpu"), tmp_path)
    assert list(runs) == ["sccl", "aecl, stage 1", "aecl, stage 2", "aecl, stage 3", "simcse", "clusterns",
                          "pairsupcon"]
    GlobalHydra.instance().clear()
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        for name, overrides in runs.items():
            cfg = compose(config_name="config", overrides=overrides)
            assert cfg.trainer.precision == "bf16-mixed" and cfg.trainer.max_steps == 12, name
            assert "sts_selection" not in (cfg.method.get("callbacks") or {}), name  # no STS data on the node
    assert (runs["aecl, stage 2"][-2:]) == ["method.e1=0", "method.e2=1000"]
