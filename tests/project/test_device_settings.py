"""Speed settings chosen per device (textcore/device_settings.py), without a GPU: the device is faked. Below the
configuration nothing chooses them by itself."""
from __future__ import annotations

import logging

import pytest
import torch

from textcore import device_settings
from textcore.device_settings import OUTSIDE_TRAINING, SETTINGS, Device, resolve_settings
from textcore.errors import ConfigError

CPU, H100, T4 = Device("cpu", None, 2), Device("cuda", 80.0, 16), Device("cuda", 15.0, 4)
NOTHING_SET = {key: None for key in SETTINGS}


def values(resolved):
    return {key: value for key, (value, _) in resolved.items()}


def test_every_setting_differs_between_the_cpu_and_a_gpu():
    cpu, gpu = values(resolve_settings(NOTHING_SET, CPU)), values(resolve_settings(NOTHING_SET, H100))
    assert cpu == {"encoder_chunk_tokens": 1024, "loader.num_workers": 0, "loader.pin_memory": False,
                   "loader.persistent_workers": False, "loader.prefetch_factor": None, "kmeans_backend": "fast"}
    assert gpu == {"encoder_chunk_tokens": 8192, "loader.num_workers": 4, "loader.pin_memory": True,
                   "loader.persistent_workers": True, "loader.prefetch_factor": 4, "kmeans_backend": "torch"}
    assert {source for _, source in resolve_settings(NOTHING_SET, H100).values()} == {"gpu default"}


def test_workers_leave_a_core_to_the_training_process():
    resolved = values(resolve_settings(NOTHING_SET, T4))
    assert resolved["encoder_chunk_tokens"] == 8192 and resolved["loader.num_workers"] == 3
    assert values(resolve_settings(NOTHING_SET, Device("cuda", 80.0, 1)))["loader.num_workers"] == 1


def test_an_explicit_setting_wins_on_every_device():
    requested = {**NOTHING_SET, "encoder_chunk_tokens": 256, "loader.pin_memory": False}
    for device in (CPU, H100):
        resolved = resolve_settings(requested, device)
        assert resolved["encoder_chunk_tokens"] == (256, "config")
        assert resolved["loader.pin_memory"] == (False, "config")
    # zero workers asked for: nothing to keep between epochs or to prefetch, whatever the device
    resolved = values(resolve_settings({**NOTHING_SET, "loader.num_workers": 0}, H100))
    assert resolved["loader.num_workers"] == 0 and resolved["loader.persistent_workers"] is False
    assert resolved["loader.prefetch_factor"] is None


def test_the_device_comes_from_the_accelerator_and_the_card(monkeypatch):
    assert device_settings.run_device("cpu").kind == "cpu"
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert device_settings.run_device("gpu").kind == "cpu"  # asked for a GPU, none there: Lightning fails later

    class Properties:
        total_memory = 80 * 2**30

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda index: Properties())
    device = device_settings.run_device("gpu")
    assert device.kind == "cuda" and device.memory_gib == pytest.approx(80.0)
    assert device_settings.run_device("cpu").kind == "cpu"


@pytest.mark.parametrize("device,expected_chunk,expected_workers", [(CPU, 1024, 0), (H100, 8192, 4)])
def test_the_run_fills_the_config_states_each_setting_and_the_datamodule_gets_them(
        toy_corpus, tmp_path, monkeypatch, caplog, device, expected_chunk, expected_workers):
    from ctclust.training import builders
    from tests.helpers import compose_config, toy_overrides

    monkeypatch.setattr(device_settings, "run_device", lambda accelerator: device)
    cfg = compose_config(toy_overrides(toy_corpus), tmp_path)
    with caplog.at_level(logging.INFO, logger="ctclust.training.builders"):
        builders.resolve_speed_settings(cfg)
    assert cfg.method.chunk_tokens == expected_chunk and cfg.dataset.loader.num_workers == expected_workers
    line = next(r.getMessage() for r in caplog.records if r.getMessage().startswith("speed settings"))
    source = "gpu default" if device.kind == "cuda" else "cpu default"
    for key in SETTINGS:
        assert f"{key}=" in line and source in line
    datamodule = builders.instantiate_datamodule(cfg)
    datamodule.setup("fit")
    loader = datamodule.train_dataloader()
    assert loader.num_workers == expected_workers and loader.pin_memory is (device.kind == "cuda")
    assert loader.persistent_workers is (device.kind == "cuda")


def test_a_command_line_value_is_kept_by_the_run(toy_corpus, tmp_path, monkeypatch, caplog):
    from ctclust.training import builders
    from tests.helpers import compose_config, toy_overrides

    monkeypatch.setattr(device_settings, "run_device", lambda accelerator: H100)
    cfg = compose_config(toy_overrides(toy_corpus) + ["encoder_chunk_tokens=512", "loader.num_workers=0"], tmp_path)
    with caplog.at_level(logging.INFO, logger="ctclust.training.builders"):
        builders.resolve_speed_settings(cfg)
    assert cfg.method.chunk_tokens == 512 and cfg.dataset.loader.num_workers == 0
    assert "encoder_chunk_tokens=512 (config)" in caplog.text


def test_below_the_configuration_nothing_chooses_a_setting_by_itself(toy_corpus):
    import dataclasses

    import numpy as np

    from datamodules.short_text import ShortTextDataModule
    from lightning_modules.sccl import SCCL
    from textcore.encoding.encoder import EncoderSettings, TextEncoder
    from textcore.kmeans import KMeansBackendError, kmeans_fit

    with pytest.raises(TypeError, match=r"needs \['chunk_tokens'\].*encoder_chunk_tokens.*textcore/device_settings.py"):
        SCCL(num_clusters=3, backbone="tiny")
    unchosen = dataclasses.replace(EncoderSettings.outside_training(), chunk_tokens=None)
    with pytest.raises(ConfigError, match="encoder_chunk_tokens is null.*textcore/device_settings.py"):
        TextEncoder.from_name("tiny", unchosen)
    loader = {"num_workers": None, "pin_memory": False, "persistent_workers": False, "prefetch_factor": None}
    with pytest.raises(ConfigError, match=r"not set \['num_workers'\].*textcore/device_settings.py"):
        ShortTextDataModule(data_dir=str(toy_corpus.parent), file=toy_corpus.name, tokenizer="tiny",
                            augmentation="virtual", loader=loader)
    with pytest.raises(KMeansBackendError, match="kmeans_backend is null.*textcore/device_settings.py"):
        kmeans_fit(np.zeros((4, 2), dtype=np.float32), 2)


@pytest.mark.parametrize("command", ["ctclust.commands.choose_k",
                                     "ctclust.commands.evaluate"])
def test_the_evaluation_commands_show_the_value_outside_training(command, capsys):
    import importlib

    with pytest.raises(SystemExit):
        importlib.import_module(command).main(["--help"])
    assert f"default {OUTSIDE_TRAINING['kmeans_backend']}" in " ".join(capsys.readouterr().out.split())


def test_an_encoder_outside_training_makes_one_padded_call_per_batch():
    from textcore.encoding.encoder import EncoderSettings

    assert EncoderSettings.outside_training().chunk_tokens == OUTSIDE_TRAINING["encoder_chunk_tokens"] == 0


def test_the_cores_a_process_may_use_are_counted_in_one_place(monkeypatch):
    """``usable_cores`` (the process's CPU affinity, which SLURM and cgroups narrow) is the only count of cores:
    the device of a run, the sweep's threads per job and the packed runs' threads all read it."""
    import ast
    import os

    from tests.project.test_architecture import ROOT, project_modules

    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 3, 5}, raising=False)
    assert device_settings.usable_cores() == 3 and device_settings.run_device("cpu").cpus == 3
    counting = sorted(m for m, path in project_modules(ROOT).items() if m != "textcore.device_settings"
                      for node in ast.walk(ast.parse(path.read_text()))
                      if isinstance(node, ast.FunctionDef) and node.name == "usable_cores"
                      or isinstance(node, ast.Attribute) and node.attr == "sched_getaffinity")
    assert counting == []
