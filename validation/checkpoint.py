"""2. The checkpoint a run resumes from: readable, a Lightning checkpoint, written by the configured method
with the configured backbone, with its optimizer state."""
from __future__ import annotations

from pathlib import Path

from omegaconf import DictConfig

from lightning_modules.shared.base import ENCODER_SETTINGS
from lightning_modules.shared.registry import same_class
from textcore import run_folder
from textcore.errors import MissingFileError, UserError
from textcore.run_folder import RunFileError, RunFolder, UnreadableCheckpointError, load_checkpoint
from validation.lookup import (
    chosen_name,
    class_of,
    method_names,
    select,
    target_of,
)


class CheckpointError(UserError, ValueError):
    """``ckpt_path`` cannot be resumed from; the message says why and what to do."""


def read_checkpoint(path: str | Path, key: str = "ckpt_path", trust: bool = False) -> dict:
    """A checkpoint read by ``textcore.run_folder.load_checkpoint`` (tensors and plain values only unless ``trust``,
    the user's opt-in), or ``CheckpointError`` naming ``key`` (``UntrustedCheckpointError`` as it is)."""
    try:
        return load_checkpoint(path, trust=trust, key=key)
    except UnreadableCheckpointError as err:
        then = ", or drop ckpt_path to start from scratch." if key == "ckpt_path" else "."
        raise CheckpointError(str(err).rstrip(".") + then) from None


def checkpoint_class(ckpt: dict, path: Path) -> str | None:
    """Class path of the module that wrote ``ckpt``: recorded in the file, in the run's
    config_resolved.yaml next to ``checkpoints/``, or inferred from its hyper-parameter names."""
    if isinstance(ckpt.get("module_class"), str):
        return ckpt["module_class"]
    run = RunFolder.of_checkpoint(path)
    try:
        target = run.method_target() if run is not None else None
    except RunFileError:  # an unreadable neighbour proves nothing
        target = None
    if target:
        return target
    return infer_class(set((ckpt.get("hyper_parameters") or {}).keys()))


def infer_class(hparam_names: set[str]) -> str | None:
    """The method whose own constructor arguments are exactly ``hparam_names`` less the encoder settings."""
    import inspect

    own_names = set(hparam_names) - set(ENCODER_SETTINGS)
    if not own_names:
        return None
    for target in method_names():
        cls = class_of(target)
        if cls is None:
            continue
        params = {name for name, p in inspect.signature(cls.__init__).parameters.items()
                  if name != "self" and p.kind is not p.VAR_KEYWORD}
        if params == own_names:
            return target
    return None


def check_checkpoint(cfg: DictConfig) -> dict | None:
    """``ckpt_path`` (when set) can be resumed by this run; returns the checkpoint as read (once, by
    ``textcore.run_folder.load_checkpoint``; ``trust_checkpoint=true`` is the user's opt-in for a file holding more
    than tensors and plain values), or None without one."""
    path = select(cfg, "ckpt_path")
    if not path:
        return None
    path = Path(str(path))
    if not path.exists():
        raise MissingFileError(
            f"ckpt_path={path} does not exist. Give the path of a checkpoint to resume, e.g. "
            f"<run folder>/{run_folder.LAST_CHECKPOINT}, or drop ckpt_path to start from scratch."
        )
    if path.is_dir():
        hint = RunFolder(path).checkpoint_path()
        raise CheckpointError(
            f"ckpt_path={path} is a folder; give the checkpoint file itself"
            + (f", e.g. ckpt_path={hint}." if hint.is_file() else f", e.g. <run folder>/{run_folder.LAST_CHECKPOINT}.")
        )
    ckpt = read_checkpoint(path, trust=bool(select(cfg, "trust_checkpoint")))
    if not isinstance(ckpt, dict) or "state_dict" not in ckpt:
        raise CheckpointError(
            f"ckpt_path={path} is a torch file but not a Lightning checkpoint (no 'state_dict'); give a checkpoint "
            "written by run.py (<run folder>/checkpoints/*.ckpt)."
        )
    hparams = dict(ckpt.get("hyper_parameters") or {})
    written_by, configured = checkpoint_class(ckpt, path), target_of(cfg, "method")
    if written_by and configured and not same_class(written_by, configured):
        names = method_names()
        theirs = next((n for target, n in names.items() if same_class(target, written_by)), written_by)
        ours = chosen_name(cfg, "method")
        raise CheckpointError(
            f"ckpt_path={path} was written by method '{theirs}' ({written_by}), but this run is method={ours}. "
            f"Resume it with `method={theirs}` (and the dataset it was trained on), or drop ckpt_path to train "
            f"{ours} from scratch."
        )
    backbone, ours = hparams.get("backbone"), select(cfg, "method.backbone")
    if backbone and ours and str(backbone) != str(ours):
        raise CheckpointError(
            f"ckpt_path={path} was trained with backbone '{backbone}', but this run builds '{ours}'. "
            f"Resume with `backbone.name={backbone}` (or the backbone=<config> that gives it), or drop ckpt_path."
        )
    if "optimizer_states" not in ckpt:
        raise CheckpointError(
            f"ckpt_path={path} holds the weights only (no optimizer state; e.g. the STS selection's "
            f"{Path(run_folder.BEST_CHECKPOINT).name}), so a run cannot continue from it. Resume from "
            f"<run folder>/{run_folder.LAST_CHECKPOINT}; to evaluate these "
            f"weights: `python tools.py evaluate --model {path}`."
        )
    return ckpt
