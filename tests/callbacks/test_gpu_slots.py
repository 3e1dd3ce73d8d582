"""hydra/launcher=packed (conf/hydra/launcher/packed.yaml, launching/gpu_slots.py): N jobs of a multirun
side by side on every GPU, memory checked before the first, each job process pinned to one GPU."""
from __future__ import annotations

import json
import os

import pytest
from omegaconf import OmegaConf

from launching import gpu_slots, packing
from tests.helpers import CONF, toy_overrides
from tests.helpers.sweeps import lean_callbacks, run_cli
from textcore.device_settings import usable_cores


def compose_with_hydra(overrides: list[str]):
    from hydra import compose, initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra

    GlobalHydra.instance().clear()
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        return compose(config_name="config", overrides=overrides, return_hydra_config=True)


def test_the_packed_launcher_is_joblib_with_gpus_times_n_jobs_and_the_slot_callback(monkeypatch):
    monkeypatch.setenv(gpu_slots.COUNT_VARIABLE, "4")  # as if the launching process had counted four GPUs
    cfg = compose_with_hydra(["hydra/launcher=packed", "hydra.callbacks.gpu_slots.runs_per_gpu=3"])
    launcher = cfg.hydra.launcher
    assert launcher._target_.endswith("JoblibLauncher") and launcher.n_jobs == 12
    assert set(cfg.hydra.callbacks) == {"output_folder", "sweep", "gpu_slots"}  # the project's callbacks kept
    assert cfg.hydra.callbacks.gpu_slots.runs_per_gpu == 3
    monkeypatch.setenv(gpu_slots.COUNT_VARIABLE, "0")  # no GPU: the host is one device
    assert compose_with_hydra(["hydra/launcher=packed"]).hydra.launcher.n_jobs == 2


def test_runs_that_do_not_fit_stop_the_multirun_before_its_first_job(monkeypatch, capsys):
    monkeypatch.setattr(packing, "devices", lambda use_gpu=True: [packing.Device(0, "NVIDIA H100", 10.0)])
    cfg = compose_with_hydra(["trainer=gpu"])
    with pytest.raises(SystemExit) as stopped:
        gpu_slots.GpuSlots(runs_per_gpu=2, run_memory_gib=8).on_multirun_start(cfg)
    assert stopped.value.code == 2
    assert ("hydra.callbacks.gpu_slots.runs_per_gpu 2: 2 runs need about 2 x 8.0 GiB = 16.0 GiB "
            "(hydra.callbacks.gpu_slots.run_memory_gib), but GPU 0 (NVIDIA H100) has 10.0 GiB free; use "
            "hydra.callbacks.gpu_slots.runs_per_gpu 1") in capsys.readouterr().err
    gpu_slots.GpuSlots(runs_per_gpu=1, run_memory_gib=8).on_multirun_start(cfg)  # one fits: no exit


def test_a_job_process_is_pinned_to_its_claimed_gpu_among_those_it_was_given(tmp_path, monkeypatch):
    monkeypatch.setenv(gpu_slots.COUNT_VARIABLE, "2")
    monkeypatch.setattr(gpu_slots, "VISIBLE_AT_START", "4,5")  # the launching process had GPUs 4 and 5
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "4,5")
    monkeypatch.setattr(packing, "_CLAIMED", {})
    import fcntl

    (tmp_path / gpu_slots.SLOT_FOLDER).mkdir()
    taken = open(tmp_path / gpu_slots.SLOT_FOLDER / "gpu0.place0.lock", "w")
    fcntl.flock(taken, fcntl.LOCK_EX | fcntl.LOCK_NB)  # another job process holds GPU 0's first place
    config = OmegaConf.create({"trainer": {"accelerator": "gpu"}, "hydra": {"sweep": {"dir": str(tmp_path)}}})
    callback = gpu_slots.GpuSlots(runs_per_gpu=2)
    callback.on_job_start(config)
    assert os.environ["CUDA_VISIBLE_DEVICES"] == "5"  # GPU 1 of the two: the next free slot
    callback.on_job_start(config)  # the process's next job keeps its GPU
    assert os.environ["CUDA_VISIBLE_DEVICES"] == "5"
    cpu = OmegaConf.create({"trainer": {"accelerator": "cpu"}, "hydra": {"sweep": {"dir": str(tmp_path / "c")}}})
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "4,5")
    callback.on_job_start(cpu)
    assert os.environ["CUDA_VISIBLE_DEVICES"] == "4,5"  # a CPU run is not pinned
    taken.close()


@pytest.mark.slow
def test_two_jobs_side_by_side_on_the_cpu(toy_corpus, tmp_path):
    sweep = tmp_path / "sweep"
    overrides = toy_overrides(toy_corpus, 2)
    proc = run_cli(["-m", "hydra/launcher=packed", "hydra.callbacks.gpu_slots.runs_per_gpu=2", "seed=0,1",
                    *overrides, *lean_callbacks(overrides), f"hydra.sweep.dir={sweep}"])
    assert proc.returncode == 0, proc.stderr[-3000:]
    results = [json.loads(p.read_text()) for p in sorted(sweep.glob("*/results.json"))]
    assert [r["seed"] for r in results] == [0, 1]
    assert {r["torch_threads"] for r in results} == {max(1, usable_cores() // 2)}  # n_jobs = 2
