"""The files of a run folder that commands find by name, and how runs are found.

A training run writes one folder (``logs/train/runs/<method>_<dataset>/<time>``, a multirun's
``<sweep>/<n>``). Validation, the callbacks, the evaluation CLIs and the scripts all read the same few
files from it; this module is the one place their names are spelled, low in the import graph so that
every layer can use it. What the clustering files hold and how to read them: ``evaluation.model_io.run_files``.
"""
from __future__ import annotations

import math
import re
import tempfile
from collections.abc import Iterable
from pathlib import Path

from textcore.errors import ENVIRONMENT_ERRNOS, MissingFileError

CONFIG = "config_resolved.yaml"       # the run's resolved config (every value after interpolation)
RESULTS = "results.json"              # final metrics, timings and the run's metadata
CHECKPOINTS = "checkpoints"           # Lightning checkpoints of the run
LAST_CHECKPOINT = f"{CHECKPOINTS}/last.ckpt"   # what a resume and the evaluation CLIs read
BEST_CHECKPOINT = f"{CHECKPOINTS}/best.ckpt"   # the weights an STS selection kept
EVALUATION = "evaluation.json"        # the end-of-training evaluation (callbacks.evaluation.final_eval)
FAILED = "failed.json"                # a multirun job that raised: type and message (launching.hydra_callbacks)
LOCK = "run.lock"                     # the process that writes the folder now (runtime.run_lock)
HYDRA = ".hydra"                      # Hydra's own copy of the config and overrides
MULTIRUN = "multirun.yaml"            # marks a multirun's top folder

# folders inside a run that hold no run of their own
_NOT_RUNS = {CHECKPOINTS, "wandb", "csv", "tensorboard", ".submitit", HYDRA, "__pycache__"}


def is_finite_number(value) -> bool:
    """A real, finite number (not a bool): what results.json can report as a metric."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def is_run(path: Path) -> bool:
    """Whether ``path`` is a run folder: it has results, a config, Hydra's record or a failure note."""
    return any((path / name).exists() for name in (RESULTS, CONFIG, HYDRA, FAILED))


def find_runs(paths: Iterable[str | Path]) -> list[Path]:
    """Run folders in ``paths`` (absolute, each once, in natural order: job 2 before job 10): each path
    itself if it is a run, else every run below it (a multirun, a folder of runs, ``logs/``)."""
    found: list[Path] = []
    for given in paths:
        path = Path(given)
        if not path.exists():
            raise MissingFileError(f"{path}: no such run or multirun folder")
        if is_run(path) and not (path / MULTIRUN).exists():
            found.append(path)
            continue
        stack = [path]
        while stack:
            folder = stack.pop()
            for child in sorted(folder.iterdir()):
                if not child.is_dir() or child.name in _NOT_RUNS:
                    continue
                (found if is_run(child) else stack).append(child)
    unique = dict.fromkeys(p.resolve() for p in found)
    return sorted(unique, key=lambda p: [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", str(p))])


def _first_existing(path: Path) -> Path:
    while not path.exists() and path != path.parent:
        path = path.parent
    return path


def folder_problem(folder: str | Path) -> str | None:
    """Why ``folder`` (which may not exist yet) could not be created and written, or None; it is created, as the
    caller (Hydra, a run) would next, since only trying tells a mount that refuses it (EPERM, a read-only file
    system) from one that does not; for root, permission bits say nothing."""
    folder = Path(folder)
    base = _first_existing(folder)
    if not base.is_dir():
        return f"'{base}' is a file, not a folder"
    try:
        folder.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=folder, prefix=".write-test-"):
            pass
    except OSError as err:
        words = ENVIRONMENT_ERRNOS.get(err.errno, "it cannot be written")
        return f"'{err.filename or folder}': {words} ({err.strerror or err})"
    return None

