"""A run folder: the names of its files, the one reader of them, and how runs are found.

A training run writes one folder (``logs/train/runs/<method>_<dataset>/<time>``, a multirun's
``<sweep>/<n>``). Validation, the callbacks, the commands, the API and the scripts all read the same few
files from it; this module is the one place their names are spelled and the one place a checkpoint is
unpickled, low in the import graph (no Lightning) so that every layer can use it.

A run folder travels (a colleague's run, a sweep copied off a cluster, a checkpoint attached to a bug
report), so what it holds is data, never code (docs/reliability.md, "What a run folder is trusted with"):

- ``RunFolder(path)``: ``.results()`` (results.json), ``.config()`` (the resolved config),
  ``.method_target()`` (the class its config names, as text: ``lightning_modules.shared.registry.method_class``
  decides whether it may be used), ``.checkpoint_path()`` / ``.checkpoint()`` (``checkpoints/last.ckpt``),
  ``.centres()`` (the final KMeans centres), ``.predictions()`` (predictions.csv);
  ``RunFolder.of_checkpoint(ckpt)``: the run folder a checkpoint belongs to.
- ``load_checkpoint(path)``: a checkpoint with ``torch.load(weights_only=True)``: tensors and plain values only,
  which is all the project writes. A file holding anything else (a pickled object whose loading would call
  code) raises ``UntrustedCheckpointError`` naming the file and the global it would call; only the explicit
  opt-in (``--trust-checkpoint``, ``trust_checkpoint=True``) loads it fully, here and nowhere else.

What the clustering files hold: ``evaluation.model_io.run_files``.
"""
from __future__ import annotations

import json
import math
import re
import tempfile
from collections.abc import Iterable
from pathlib import Path

from textcore.errors import ENVIRONMENT_ERRNOS, MissingFileError, UserError

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
OVERRIDES = f"{HYDRA}/overrides.yaml"  # the command line's overrides, as Hydra recorded them
CENTRES = "kmeans_centroids.npy"      # the final KMeans centres, float32 [K, d] (evaluation.model_io.predict)
CENTRES_META = "kmeans_centroids.json"  # K, d and the pooling of the centres
PREDICTIONS = "predictions.csv"       # the clusters of the training texts (callbacks.evaluation.clustering_predictions)

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



# -- reading a run folder -----------------------------------------------------------------------------------------
TRUST_OPTION = "--trust-checkpoint"  # the opt-in of the commands; the API and run.py say trust_checkpoint
TRUST_HOW = f"{TRUST_OPTION} (Python: trust_checkpoint=True; run.py: trust_checkpoint=true)"


class RunFileError(UserError, ValueError):
    """A file of a run folder that exists but cannot be read as what it should be; the message names it."""


class UntrustedCheckpointError(UserError, ValueError):
    """A checkpoint that holds more than tensors and plain values: loading it would call code it names."""


class UnreadableCheckpointError(UserError, ValueError):
    """A file that is not a readable checkpoint (truncated, corrupted, not a torch file)."""


def _first_line(err: BaseException) -> str:
    lines = [line.strip() for line in str(err).splitlines() if line.strip()]
    if lines and lines[0].startswith("Weights only load failed"):  # torch's advice first; what failed below it
        lines = [line for line in lines if line.lower().startswith(("unsupported", "trying"))] or lines
    return f"{type(err).__name__}: {lines[0][:160]}" if lines else type(err).__name__


def _globals_it_would_call(path: Path) -> list[str]:
    """The globals a pickle names beyond what ``weights_only`` allows, read from its opcodes: nothing is run."""
    import torch

    try:
        return list(torch.serialization.get_unsafe_globals_in_checkpoint(str(path)))
    except Exception:  # noqa: BLE001 - a file torch cannot even scan: the caller reports it unreadable
        return []


def load_checkpoint(path: str | Path, *, trust: bool = False, key: str | None = None) -> dict:
    """The checkpoint at ``path`` on the CPU (memory-mapped when its format allows), read with
    ``torch.load(weights_only=True)``. ``trust``: the user's explicit opt-in for a file they trust that needs more
    (``--trust-checkpoint``); nothing else loads a checkpoint without ``weights_only``. ``key``: the option or
    config key the user gave the file with, named in the messages. Raises ``UntrustedCheckpointError`` (the file,
    the global it would call, the opt-in) or ``UnreadableCheckpointError``; never runs code from the file
    without ``trust``."""
    import pickle

    import torch

    path = Path(path)
    named = f"{key}={path}" if key else f"'{path}'"
    if not path.exists():
        raise MissingFileError(f"{named} does not exist.")
    if not path.is_file():
        raise UnreadableCheckpointError(f"{named} is not a file (a folder or a device); give a checkpoint file.")
    errors: list[str] = []
    for mmap in (True, False):  # mmap needs the zip format (every torch.save since 1.6)
        try:
            return torch.load(path, map_location="cpu", weights_only=True, mmap=mmap)
        except pickle.UnpicklingError as err:
            unsafe = _globals_it_would_call(path)
            if unsafe or "unsupported global" in str(err).lower():
                if trust:  # the opt-in's one place: the user said they trust this file
                    return torch.load(path, map_location="cpu", weights_only=False, mmap=mmap)  # noqa: S614
                what = ", ".join(unsafe) if unsafe else _unsupported(err)
                raise UntrustedCheckpointError(
                    f"{named} is not loaded: it holds more than tensors and plain values, and loading it would call "
                    f"{what} (code that came with the file). If you trust where this file came from, load it with "
                    f"{TRUST_HOW}.") from None
            errors.append(_first_line(err))
        except FileNotFoundError:
            raise MissingFileError(f"{named} does not exist.") from None
        except Exception as err:  # noqa: BLE001 - any other failure to read is the user's file, reported below
            errors.append(_first_line(err))
    raise UnreadableCheckpointError(
        f"{named} is not a readable checkpoint ({errors[-1]}); it is probably truncated or corrupted, e.g. by an "
        "interrupted save or a full disk. Use another checkpoint of the run.")


def _unsupported(err: BaseException) -> str:
    """The global torch's weights-only unpickler refused, from its message (when the opcode scan named none)."""
    found = re.search(r"unsupported GLOBAL (\S+)", str(err), flags=re.IGNORECASE)
    return found.group(1) if found else "a global that is not a tensor or a plain value"


class RunFolder:
    """One run folder of ``run.py`` (which may be incomplete: every reader says what is missing).

    ``RunFolder(path).results()`` -> dict or None; ``.config()`` -> the resolved config or None;
    ``.method_target()`` -> ``method._target_`` or None; ``.checkpoint_path(best=False)`` -> Path;
    ``.checkpoint(trust=False)`` -> the loaded dict; ``.centres()`` -> float32 [K, d] or None; ``.predictions()``
    -> a DataFrame or None; ``RunFolder.of_checkpoint(ckpt)`` -> the run a checkpoint belongs to, or None.
    """

    def __init__(self, path: str | Path):
        self.path = Path(path)

    def __repr__(self) -> str:
        return f"RunFolder('{self.path}')"

    @classmethod
    def of_checkpoint(cls, checkpoint: str | Path) -> RunFolder | None:
        """The run folder ``checkpoint`` belongs to: the one holding its resolved config, ``<run>/checkpoints/x.ckpt``
        or beside it; None for a checkpoint copied out of its run."""
        checkpoint = Path(checkpoint)
        for folder in (checkpoint.parent.parent, checkpoint.parent):
            if (folder / CONFIG).is_file():
                return cls(folder)
        return None

    # the files by name
    @property
    def results_file(self) -> Path:
        return self.path / RESULTS

    @property
    def config_file(self) -> Path:
        return self.path / CONFIG

    def checkpoint_path(self, best: bool = False) -> Path:
        """``checkpoints/last.ckpt`` (what a resume and the commands read), or the STS selection's ``best.ckpt``."""
        return self.path / (BEST_CHECKPOINT if best else LAST_CHECKPOINT)

    def has(self, name: str) -> bool:
        """Whether the run folder holds the file ``name`` (one of this module's names)."""
        return (self.path / name).is_file()

    # the files' contents
    def results(self) -> dict | None:
        """results.json (None when the run wrote none: still running, killed, crashed), or ``RunFileError``."""
        return self.json(RESULTS)

    def json(self, name: str) -> dict | None:
        """The JSON object in file ``name`` of the run (None when absent), or ``RunFileError`` naming the file."""
        path = self.path / name
        if not path.is_file():  # absent, or not a regular file (a device such as /dev/zero never ends)
            return None
        try:
            value = json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return None
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
            raise RunFileError(f"'{path}' is not readable JSON ({_first_line(err)}); the run was probably "
                               "interrupted while writing it.") from None
        if not isinstance(value, dict):
            raise RunFileError(f"'{path}' holds a JSON {type(value).__name__}, not an object.")
        return value

    def config(self, name: str = CONFIG):
        """The resolved config (an OmegaConf ``DictConfig``; None when absent), or ``RunFileError``. ``name``:
        another config file of the run (Hydra's ``.hydra/config.yaml``). Loading it resolves nothing and
        instantiates nothing: ``_target_`` values are text here."""
        from omegaconf import DictConfig, OmegaConf

        path = self.path / name
        if not path.is_file():
            return None
        try:
            cfg = OmegaConf.load(path)
        except Exception as err:  # noqa: BLE001 - YAML and OmegaConf raise many kinds; all mean an unreadable file
            raise RunFileError(f"'{path}' is not a readable config ({_first_line(err)}).") from None
        if not isinstance(cfg, DictConfig):
            raise RunFileError(f"'{path}' holds a YAML list, not a config.")
        return cfg

    def config_value(self, key: str, default=None):
        """``key`` (dotted) of the resolved config, or ``default`` (no config, no such key, unreadable config)."""
        from omegaconf import OmegaConf

        try:
            cfg = self.config()
        except RunFileError:
            return default
        return default if cfg is None else OmegaConf.select(cfg, key, default=default)

    def overrides(self) -> list[str] | None:
        """The command line's overrides as Hydra recorded them (``.hydra/overrides.yaml``), or None."""
        from omegaconf import ListConfig, OmegaConf

        path = self.path / OVERRIDES
        if not path.is_file():
            return None
        try:
            values = OmegaConf.load(path)
        except Exception as err:  # noqa: BLE001 - YAML and OmegaConf raise many kinds
            raise RunFileError(f"'{path}' is not readable ({_first_line(err)}).") from None
        if not isinstance(values, ListConfig):
            raise RunFileError(f"'{path}' is not a list of overrides.")
        return [str(v) for v in values]

    def method_target(self) -> str | None:
        """``method._target_`` of the resolved config, as text (never imported here)."""
        target = self.config_value("method._target_")
        return None if target is None else str(target)

    def checkpoint(self, *, best: bool = False, trust: bool = False, key: str | None = None) -> dict:
        """The run's last (or best) checkpoint, read by :func:`load_checkpoint`."""
        path = self.checkpoint_path(best)
        if not path.is_file():
            raise MissingFileError(
                f"Run folder '{self.path}' has no {path.relative_to(self.path)}: the run did not finish its first "
                "step or checkpointing was disabled (callbacks.checkpoint). Pass a .ckpt file instead.")
        return load_checkpoint(path, trust=trust, key=key)

    def centres(self):
        """The final KMeans centres (float32 [K, d]), or None when the run saved none. Read as a plain array
        (``allow_pickle=False``: an .npy file holding objects is refused)."""
        import numpy as np

        path = self.path / CENTRES
        if not path.is_file():
            return None
        try:
            return np.load(path, allow_pickle=False).astype(np.float32)
        except (OSError, ValueError) as err:
            raise RunFileError(f"'{path}' is not a readable array of centres ({_first_line(err)}).") from None

    def predictions(self):
        """predictions.csv as a DataFrame (texts as strings, nothing parsed as NA), or None when absent."""
        path = self.path / PREDICTIONS
        if not path.is_file():
            return None
        import pandas as pd

        return pd.read_csv(path, dtype={"text": str, "label": str}, keep_default_na=False)
