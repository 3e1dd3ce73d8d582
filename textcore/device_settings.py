"""The speed settings that depend on the device, and the values work outside training takes: the one home of
their defaults (docs/configuration.md, "Where each default lives").

conf/config.yaml leaves them null: ``encoder_chunk_tokens``, ``loader.num_workers``, ``loader.pin_memory``,
``loader.persistent_workers``, ``loader.prefetch_factor``, ``kmeans_backend``. A training run
(``ctclust.training.builders``) fills each one left null
from the trainer's accelerator and, on a GPU, the card's memory (:func:`resolve_settings`), before anything is
built (so ``config_resolved.yaml`` records the chosen values), and states each, with where it came from, in one
log line. A value given in the configuration or on the command line is kept. The code below the configuration
(the encoder, the datamodules, KMeans) takes the value it is given and has no default of its own.

- CPU (measured on 2 cores, BENCHMARKS.md): length-sorted encoder chunks of 1024 padded tokens (less padding
  is less work for a CPU), tokenisation in the training process (workers fight it for the two cores), no
  pinned memory (nothing is copied to a device), KMeans ``fast``.
- GPU: length-sorted encoder chunks of 8192 tokens. On an H100 (BENCHMARKS.md, "GPU end to end") the raw
  step with chunks of 8192 ran 1.3-1.6x faster than one call padded to the batch's longest text in fp32 (SCCL,
  AECL, PairSupCon at the papers' batches), as fast in bf16, and took 40-48 % less memory; on an H200 the run
  with chunks of 1024 (~12 calls a step) was the slowest measured. Tokenisation in worker processes, batches in
  pinned memory (the copy overlaps the step), workers kept between epochs, four batches prefetched per worker;
  KMeans (centroid initialisation, pseudo-labels, evaluation) on the GPU (``torch``).
- Outside training (:data:`OUTSIDE_TRAINING`: the evaluation commands, and the K scan a run makes before
  training with the untrained encoder on the CPU, ``ctclust.training.auto_clusters``): one padded encoder call
  per batch and KMeans ``fast``.

Nothing of the project is imported here (torch only inside :func:`run_device`), so every layer may read it.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, Mapping

CPU_CHUNK_TOKENS = 1024
GPU_CHUNK_TOKENS = 8192
GPU_MAX_WORKERS = 4
GPU_PREFETCH = 4
# config keys (dotted) of the settings chosen here
SETTINGS = ("encoder_chunk_tokens", "loader.num_workers", "loader.pin_memory", "loader.persistent_workers",
            "loader.prefetch_factor", "kmeans_backend")
GPU_ACCELERATORS = ("gpu", "cuda")
# Work outside training embeds texts in length-sorted batches (TextEncoder.encode), where chunks save nothing
# (0: one padded call per batch), and clusters embeddings that are host arrays (KMeans ``fast``, the CPU's).
# The evaluation commands show these as their option defaults; the numbers they report were made with them.
OUTSIDE_TRAINING = {"encoder_chunk_tokens": 0, "kmeans_backend": "fast"}


@dataclass(frozen=True)
class Device:
    """What the defaults depend on: ``kind`` (``cpu`` | ``cuda``), the card's memory in GiB (None on a CPU)
    and the CPU cores this process may use."""

    kind: str
    memory_gib: float | None = None
    cpus: int = 1


def usable_cores() -> int:
    """Cores this process may run on (SLURM/cgroup affinity), not the machine's count."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # macOS, Windows
        return os.cpu_count() or 1


def run_device(accelerator: str | None) -> Device:
    """The device of a run whose trainer has ``accelerator`` (``cpu``, ``gpu``, ``cuda``, ``auto``)."""
    import torch

    cpus = usable_cores()
    wants_gpu = str(accelerator or "cpu").lower() in (*GPU_ACCELERATORS, "auto")
    if not wants_gpu or not torch.cuda.is_available():
        return Device("cpu", None, cpus)
    memory = torch.cuda.get_device_properties(torch.cuda.current_device()).total_memory / 2**30
    return Device("cuda", memory, cpus)


def device_defaults(device: Device) -> dict[str, Any]:
    """The value of each of :data:`SETTINGS` for ``device``."""
    if device.kind != "cuda":
        return {"encoder_chunk_tokens": CPU_CHUNK_TOKENS, "loader.num_workers": 0, "loader.pin_memory": False,
                "loader.persistent_workers": False, "loader.prefetch_factor": None, "kmeans_backend": "fast"}
    workers = max(1, min(GPU_MAX_WORKERS, device.cpus - 1))
    return {"encoder_chunk_tokens": GPU_CHUNK_TOKENS,
            "loader.num_workers": workers, "loader.pin_memory": True, "loader.persistent_workers": True,
            "loader.prefetch_factor": GPU_PREFETCH, "kmeans_backend": "torch"}


def resolve_settings(requested: Mapping[str, Any], device: Device) -> dict[str, tuple[Any, str]]:
    """(value, source) for each of :data:`SETTINGS`: the requested value when it is not None (``config``), else
    the device's default (``cpu default`` / ``gpu default``). Settings that only make sense with workers follow
    the chosen number of workers: without workers nothing persists or prefetches."""
    defaults = device_defaults(device)
    origin = "gpu default" if device.kind == "cuda" else "cpu default"
    out = {}
    for key in SETTINGS:
        value = requested.get(key)
        out[key] = (value, "config") if value is not None else (defaults[key], origin)
    if not out["loader.num_workers"][0]:
        for key in ("loader.persistent_workers", "loader.prefetch_factor"):
            if out[key][1] != "config":
                out[key] = (False if key == "loader.persistent_workers" else None, out[key][1])
    return out


def describe(resolved: Mapping[str, tuple[Any, str]], device: Device) -> str:
    """One log line: the device, then each setting, its value and where it came from."""
    where = "CPU" if device.kind != "cuda" else f"GPU with {device.memory_gib:.0f} GiB"
    parts = ", ".join(f"{key}={value} ({source})" for key, (value, source) in resolved.items())
    return f"speed settings for the {where}: {parts}"
