"""Hydra callback of ``hydra/launcher=packed`` (conf/hydra/launcher/packed.yaml): N jobs of a multirun side by
side on every GPU through Hydra's joblib launcher.

- **multirun start** (the launching process): N runs must fit into every GPU's free memory (the host's without
  a GPU), a run's memory measured (``run_memory_gib``) or estimated (launching.packing); otherwise
  one line and exit 2, before any job starts.
- **job start** (the job's process, before anything touches CUDA): the process claims a GPU slot for its life
  (a lock file in ``<sweep dir>/.gpu_slots``) and sets ``CUDA_VISIBLE_DEVICES`` to that GPU. The joblib launcher
  runs job after job in the same ``n_jobs`` processes and a process keeps the CUDA context of its first job, so
  the GPU goes with the process, not the job: with n_jobs = GPUs x N, each GPU has N processes.

Importing this module registers ``${packed_jobs:N}`` (GPUs, or 1 without one, x N), the launcher's ``n_jobs``.
"""
from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

from hydra.experimental.callback import Callback
from omegaconf import DictConfig, OmegaConf

from launching import packing
from textcore.errors import USER_ERROR_EXIT_CODE, ConfigError

RESOLVER = "packed_jobs"
SLOT_FOLDER = ".gpu_slots"
COUNT_VARIABLE = "GPU_SLOTS_COUNT"  # the launching process's GPU count, inherited by the job processes
# the GPUs the launching process was given (this module is imported once per process, before any job sets it)
VISIBLE_AT_START = os.environ.get("CUDA_VISIBLE_DEVICES")


def gpu_count() -> int:
    """GPUs of the multirun, counted once in the launching process (``nvidia-smi``): a job process reads the
    count it inherited, so it asks CUDA nothing before its GPU is chosen."""
    if COUNT_VARIABLE not in os.environ:
        os.environ[COUNT_VARIABLE] = str(len(packing.gpus()))
    return int(os.environ[COUNT_VARIABLE])


def packed_jobs(runs_per_gpu) -> int:
    return max(1, gpu_count()) * int(runs_per_gpu)


if not OmegaConf.has_resolver(RESOLVER):
    OmegaConf.register_new_resolver(RESOLVER, packed_jobs)


def _uses_gpu(config: DictConfig) -> bool:
    accelerator = str(OmegaConf.select(config, "trainer.accelerator", default="cpu"))
    return accelerator in ("gpu", "cuda", "auto")


class GpuSlots(Callback):
    """See the module docstring. ``runs_per_gpu``: N; ``run_memory_gib``: one run's memory, measured (null:
    estimated)."""

    def __init__(self, runs_per_gpu: int = 1, run_memory_gib: float | None = None):
        if int(runs_per_gpu) < 1:
            raise ConfigError(f"hydra.callbacks.gpu_slots.runs_per_gpu must be 1 or more, got {runs_per_gpu}")
        self.runs_per_gpu = int(runs_per_gpu)
        self.run_memory_gib = run_memory_gib

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        found = packing.devices(_uses_gpu(config))
        os.environ[COUNT_VARIABLE] = str(sum(1 for d in found if d.index is not None))
        try:
            if self.run_memory_gib is not None:
                run_gib, source = float(self.run_memory_gib), "hydra.callbacks.gpu_slots.run_memory_gib"
            else:
                from launching.gpu_figures import gpu_figures

                run_gib, source = packing.estimate_run_gib(config, gpu_figures(), on_gpu=gpu_count() > 0)
                if run_gib is None:
                    raise ConfigError(f"hydra/launcher=packed: no memory figure for a run ({source}); give "
                                      "hydra.callbacks.gpu_slots.run_memory_gib=<GiB> measured for one run")
            packing.check_fits(found, self.runs_per_gpu, run_gib, source,
                               option="hydra.callbacks.gpu_slots.runs_per_gpu")
        except ConfigError as err:
            print(f"error: {err}", file=sys.stderr, flush=True)
            sys.exit(USER_ERROR_EXIT_CODE)

    def on_job_start(self, config: DictConfig, **kwargs: Any) -> None:
        count = gpu_count()
        if not count or not _uses_gpu(config):
            return
        gpu = packing.claim_gpu(Path(str(config.hydra.sweep.dir)) / SLOT_FOLDER, count, self.runs_per_gpu)
        names = [v for v in (VISIBLE_AT_START or "").split(",") if v.strip()]
        os.environ["CUDA_VISIBLE_DEVICES"] = names[gpu] if gpu < len(names) else str(gpu)
