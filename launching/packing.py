"""Several runs side by side on one card (docs/gpu.md, "Several runs on one card"): the devices and their free
memory, a run's memory (given, or estimated), the check before anything starts, and the slots runs take.

One small model at a paper's batch leaves most of a large card idle (BENCHMARKS.md: SCCL's bf16 step uses a few
per cent of an H100), so N runs per GPU can finish more runs per hour than one after another.
``python tools.py reproduce ... --runs-per-gpu N`` (launching.reproduce) and Hydra's multirun
(``hydra/launcher=packed``, launching.gpu_slots) both start runs only when N runs fit into every GPU's
free memory: a run's memory is ``--run-memory-gib`` (a measured figure) or an estimate, and a run that would not
fit is refused before any starts, with the number that fits. Without a GPU the host is one device and its
available memory is checked the same way, so the CPU runs the same code (N processes side by side).

The estimate of a run's memory, in this order: the raw step's peak memory measured on a GPU for the same method,
backbone, batch and precision (BENCHMARKS.md's GPU section, ``scripts/bench/gpu.py``) plus the CUDA context;
otherwise a count from the backbone's configuration: 16 bytes a parameter (float32 weights, gradients, Adam's two
moments) and the activations of batch x 3 views x max length tokens through every layer (34 bytes a token and
hidden unit a layer in 16-bit precision, twice that in float32, as Korthikanti et al. 2022 count a transformer
layer), plus the process itself. The estimate is only that: a figure measured on the card (the peak of one run,
``nvidia-smi`` or ``torch.cuda.max_memory_allocated``) given as ``--run-memory-gib`` replaces it.
"""
from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from textcore.errors import ConfigError

CUDA_CONTEXT_GIB = 1.0  # the CUDA context, cuBLAS workspaces and the caching allocator's slack of one process
PROCESS_GIB = 1.0  # a training process's own memory on the host (Python, torch, transformers, Lightning, data)
ACTIVATION_BYTES = {"16": 34, "32": 68}  # per token, hidden unit and layer (16-bit autocast / float32)
VIEWS = 3  # SCCL's original and two views: the most encoder inputs a step of a short-text method holds


@dataclass(frozen=True)
class Device:
    """A GPU (``index`` its CUDA index) or the host (``index`` None), and its free memory in GiB."""

    index: int | None
    name: str
    free_gib: float

    @property
    def label(self) -> str:
        return "the host" if self.index is None else f"GPU {self.index} ({self.name})"


@dataclass(frozen=True)
class Slot:
    """Where one run goes: a device and the run's place on it (0 .. N-1)."""

    device: Device
    place: int

    def environment(self) -> dict[str, str]:
        """The variables of a run process in this slot: its one GPU (``CUDA_VISIBLE_DEVICES``)."""
        return {} if self.device.index is None else {"CUDA_VISIBLE_DEVICES": str(self.device.index)}


def host_available_gib() -> float:
    """Memory the host can give new processes (``MemAvailable`` of /proc/meminfo; elsewhere the total)."""
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) / 2**20
    except OSError:
        pass
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30


def gpus() -> list[Device]:
    """The GPUs this process may use and their free memory, read with ``nvidia-smi`` (so that the launching
    process makes no CUDA context of its own on GPU 0), else with torch; none without CUDA."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if shutil.which("nvidia-smi"):
        done = subprocess.run(["nvidia-smi", "--query-gpu=index,name,memory.free", "--format=csv,noheader,nounits"],
                              capture_output=True, text=True)
        if done.returncode == 0:
            rows = [[cell.strip() for cell in line.split(",")] for line in done.stdout.strip().splitlines()]
            found = [Device(int(index), name, float(free) / 1024) for index, name, free in rows]
            if visible is not None:  # the indices CUDA_VISIBLE_DEVICES names, renumbered 0.. as CUDA sees them
                wanted = [int(v) for v in visible.split(",") if v.strip().isdigit()]
                found = [Device(i, d.name, d.free_gib) for i, d in enumerate(d for d in found if d.index in wanted)]
            return found
    try:
        import torch
    except ImportError:
        return []
    if not torch.cuda.is_available():
        return []
    return [Device(i, torch.cuda.get_device_name(i), torch.cuda.mem_get_info(i)[0] / 2**30)
            for i in range(torch.cuda.device_count())]


def devices(use_gpu: bool = True) -> list[Device]:
    """Every GPU, or the host when there is none (or ``use_gpu`` is false)."""
    found = gpus() if use_gpu else []
    return found or [Device(None, "CPU", host_available_gib())]


def slots(found: Sequence[Device], runs_per_device: int) -> list[Slot]:
    """``runs_per_device`` slots on each device, the first place of every device first (runs spread evenly)."""
    if runs_per_device < 1:
        raise ConfigError(f"--runs-per-gpu {runs_per_device}: give 1 or more")
    return [Slot(device, place) for place in range(runs_per_device) for device in found]


def check_fits(found: Sequence[Device], runs_per_device: int, run_gib: float, source: str,
               option: str = "--runs-per-gpu") -> None:
    """Refuses (ConfigError, before anything starts) when ``runs_per_device`` runs of ``run_gib`` each do not
    fit into every device's free memory; the message gives the number that fits."""
    for device in found:
        need = runs_per_device * run_gib
        if need > device.free_gib:
            fits = int(device.free_gib // run_gib) if run_gib > 0 else runs_per_device
            advice = (f"use {option} {fits}" if fits >= 1 else
                      "no run fits there at this estimate: free memory first, or run with a smaller batch_size")
            raise ConfigError(
                f"{option} {runs_per_device}: {runs_per_device} runs need about {runs_per_device} x {run_gib:.1f} GiB "
                f"= {need:.1f} GiB ({source}), but {device.label} has {device.free_gib:.1f} GiB free; {advice}, or "
                "give --run-memory-gib <GiB> measured for one run if the estimate is too high "
                "(docs/gpu.md, \"Several runs on one card\")")


# -- a run's memory -------------------------------------------------------------------------------------------------
def estimate_run_gib(cfg, bench_rows: Sequence[dict], on_gpu: bool) -> tuple[float | None, str]:
    """(GiB, where the figure comes from) for one run of ``cfg``; (None, why) when nothing gives one."""
    from omegaconf import OmegaConf

    precision = str(OmegaConf.select(cfg, "trainer.precision", default="32", throw_on_resolution_failure=False))
    sixteen = precision.startswith(("16", "bf16"))
    if on_gpu:
        row = measured_row(cfg, bench_rows, "bf16" if precision.startswith("bf16") else
                           "fp16" if sixteen else "fp32")
        if row is not None:
            return (row["peak_gib"] + CUDA_CONTEXT_GIB,
                    f"the raw step's peak of {row['peak_gib']:.1f} GiB measured for {row['method']}, {row['arch']}, "
                    f"batch {row['batch']}, {row['precision']} in BENCHMARKS.md, plus {CUDA_CONTEXT_GIB:.0f} GiB of "
                    "CUDA context")
    counted = counted_gib(cfg, sixteen)
    if counted is None:
        return None, (f"no measured figure for backbone '{cfg.backbone.name}' and its configuration could not be "
                      "read offline")
    base = CUDA_CONTEXT_GIB if on_gpu else PROCESS_GIB
    return counted + base, (f"counted from the backbone's size and batch {cfg.batch_size} x {VIEWS} views x "
                            f"{cfg.max_length} tokens, plus {base:.0f} GiB for the process")


def measured_row(cfg, bench_rows: Sequence[dict], precision: str) -> dict | None:
    """BENCHMARKS.md's raw-step row (the project's layout, no cached gradients) for the run's method, backbone
    architecture, batch and precision; with a chunk setting that matches when the run names one."""
    backbone = str(cfg.backbone.name).split("/")[-1]
    arch = next((a for a in ("distilbert-base", "bert-large", "bert-base") if backbone.startswith(a)), None)
    chunk = cfg.get("encoder_chunk_tokens")
    rows = [r for r in bench_rows if r.get("peak_gib") is not None and r["method"] == str(cfg.method.name)
            and r["arch"] == arch and r["batch"] == int(cfg.batch_size) and r["precision"] == precision
            and r["cached"] == "-" and (chunk is None or r["chunk"] == (str(chunk) if chunk else "-"))]
    return max(rows, key=lambda r: r["peak_gib"]) if rows else None  # the larger of the layouts: a safe side


def counted_gib(cfg, sixteen: bool) -> float | None:
    """Training memory of one run from the backbone's configuration (module docstring), None if unreadable."""
    config = backbone_config(str(cfg.backbone.name))
    if config is None:
        return None
    hidden = _first(config, "hidden_size", "dim", "d_model")
    layers = _first(config, "num_hidden_layers", "n_layers", "num_layers")
    inner = _first(config, "intermediate_size", "hidden_dim", "ffn_dim") or 4 * (hidden or 0)
    vocab = getattr(config, "vocab_size", 0)
    if not hidden or not layers:
        return None
    parameters = vocab * hidden + layers * (4 * hidden * hidden + 2 * hidden * inner)
    tokens = int(cfg.batch_size) * VIEWS * int(cfg.max_length)
    activations = layers * tokens * hidden * ACTIVATION_BYTES["16" if sixteen else "32"]
    return (16 * parameters + activations) / 2**30


def _first(config, *names: str) -> int | None:
    return next((int(getattr(config, n)) for n in names if getattr(config, n, None)), None)


def backbone_config(name: str):
    """The backbone's transformers configuration (the tiny test backbone's own; a folder's, the offline MiniLM's,
    a Hub name's from the local cache), None when it cannot be read without the network."""
    if name == "tiny":
        from textcore.encoding.backbone import build_tiny_bert

        return build_tiny_bert().config
    from transformers import AutoConfig

    from textcore.encoding.backbone import resolve_backbone_path

    try:
        return AutoConfig.from_pretrained(resolve_backbone_path(name), local_files_only=True)
    except (OSError, ValueError):
        return None


# -- Hydra's multirun: a job process's slot --------------------------------------------------------------------------
_CLAIMED: dict[str, tuple[int, object]] = {}  # lock folder -> (GPU index, the open lock file, held for the process)


def claim_gpu(lock_folder: Path, gpu_count: int, runs_per_gpu: int) -> int:
    """The GPU of this process: the first free slot (place-major, so GPUs fill evenly) whose lock file it can
    lock. A job process of the joblib launcher runs job after job and keeps the CUDA context of its first, so the
    slot is claimed once per process and held until it ends (the lock goes with the process); with ``n_jobs`` =
    GPUs x N processes, no GPU ever has more than N."""
    key = str(lock_folder)
    if key in _CLAIMED:
        return _CLAIMED[key][0]
    lock_folder.mkdir(parents=True, exist_ok=True)
    for place in range(runs_per_gpu):
        for gpu in range(gpu_count):
            handle = open(lock_folder / f"gpu{gpu}.place{place}.lock", "w")
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                handle.close()
                continue
            _CLAIMED[key] = (gpu, handle)
            return gpu
    raise RuntimeError(f"all {gpu_count} x {runs_per_gpu} GPU slots in {lock_folder} are taken: more job processes "
                       "than hydra.launcher.n_jobs (hydra/launcher=packed sets n_jobs = GPUs x runs_per_gpu)")
