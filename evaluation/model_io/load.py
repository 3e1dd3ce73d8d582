"""One loader for every evaluation CLI: a model reference -> (TextEncoder, evaluation pooling).

A reference can be
- a run directory of ``run.py`` (holds ``config_resolved.yaml`` and ``checkpoints/last.ckpt``);
- a Lightning checkpoint ``*.ckpt``;
- a sentence-transformers folder (``modules.json``: Transformer + Pooling [+ Dense] [+ Normalize]),
  e.g. one written by ``python tools.py export``;
- a plain Hugging Face model folder, a Hub name, or the aliases ``minilm`` / ``tiny``.

Checkpoints: Lightning stores the module's ``save_hyperparameters`` (backbone, pooling,
max_length, ...) but not its class. When the run's ``config_resolved.yaml`` is beside the
``checkpoints`` folder, the class named by ``method._target_`` restores the whole module, so
its own ``eval_pooling`` is used. Without it (a checkpoint copied elsewhere), the encoder is
rebuilt from the hyper-parameters and the ``encoder.*`` weights of the state dict, with
``hyper_parameters["eval_pooling"]`` or else the training pooling for evaluation.

A checkpoint is read once, by ``textcore.run_folder.load_checkpoint`` (tensors and plain values only, unless the
user passed the opt-in ``trust_checkpoint``), and the module is built from that dict
(``lightning_modules.shared.restore``); the class its run's config names is used only when it is a method class.
"""

from __future__ import annotations

import json
import logging
import warnings
from pathlib import Path

import torch

from textcore import run_folder
from textcore.encoding.backbone import BackboneUnavailableError
from textcore.encoding.encoder import EncoderSettings, TextEncoder
from textcore.encoding.pooling import POOLINGS
from textcore.errors import UserError
from textcore.run_folder import RunFolder, load_checkpoint

log = logging.getLogger(__name__)


class ModelLoadError(UserError, ValueError):
    """A model reference that cannot be turned into an encoder; the message says why."""


def _check_pooling(pooling: str | None) -> None:
    if pooling is not None and pooling not in POOLINGS:
        raise ModelLoadError(f"pooling must be one of {POOLINGS}, got '{pooling}'")


def run_checkpoint(run_dir: Path) -> Path:
    ckpt = RunFolder(run_dir).checkpoint_path()
    if not ckpt.is_file():
        raise ModelLoadError(
            f"Run directory '{run_dir}' has no {run_folder.LAST_CHECKPOINT}: the run did not finish its first "
            "step or checkpointing was disabled (callbacks.checkpoint). Pass a .ckpt file instead."
        )
    return ckpt


def encoder_weights(state_dict: dict) -> dict:
    """The encoder's own entries of a module's state dict (``encoder.*``, prefix dropped)."""
    prefix = "encoder."
    return {k[len(prefix):]: v for k, v in state_dict.items() if k.startswith(prefix)}


def checkpoint_encoder_weights(ckpt: str | Path) -> dict:
    """``encoder_weights`` of a checkpoint file this project wrote (tensors only: no code is unpickled)."""
    return encoder_weights(load_checkpoint(ckpt)["state_dict"])


def read_run_checkpoint(ckpt: Path, key: str = "checkpoint", trust: bool = False) -> dict:
    """The checkpoint ``ckpt`` read once (``textcore.run_folder.load_checkpoint``: tensors and plain values only
    unless ``trust``), checked to be a Lightning checkpoint. ``key``: the option the user gave the file with."""
    if not ckpt.is_file():
        raise ModelLoadError(f"Checkpoint '{ckpt}' does not exist.")
    checkpoint = load_checkpoint(ckpt, trust=trust, key=key)
    if not isinstance(checkpoint, dict) or not isinstance(checkpoint.get("state_dict"), dict):
        raise ModelLoadError(f"{key}={ckpt} is a torch file but not a Lightning checkpoint (no 'state_dict'); give a "
                             "checkpoint run.py wrote (<run folder>/checkpoints/*.ckpt).")
    return checkpoint


def run_module(checkpoint: dict, ckpt: Path):
    """(the whole LightningModule in eval mode, the run's config, the run folder) of a loaded checkpoint inside its
    run folder; (None, None, None) when no run config beside it names its class. The class is used only when it is
    a method class (``registry.method_class``)."""
    from lightning_modules.shared.restore import module_from_checkpoint

    run = RunFolder.of_checkpoint(ckpt)
    cfg = run.config() if run is not None else None
    target = run.method_target() if run is not None else None
    if not target:
        return None, None, None
    module = module_from_checkpoint(checkpoint, target, key=f"method._target_ of '{run.config_file}'")
    log.info("loaded %s from %s (class from the run's %s)", target, ckpt, run_folder.CONFIG)
    return module, cfg, run.path


def load_run_module(ckpt: Path, key: str = "checkpoint", trust: bool = False):
    """``run_module`` of the checkpoint file ``ckpt`` (read once by ``read_run_checkpoint``)."""
    return run_module(read_run_checkpoint(ckpt, key, trust), ckpt)


def load_checkpoint_encoder(ckpt: str | Path, pooling: str | None = None,
                            trust: bool = False) -> tuple[TextEncoder, str]:
    """Encoder of a Lightning checkpoint written by ``run.py`` (see module docstring); the file is read once."""
    ckpt = Path(ckpt)
    state = read_run_checkpoint(ckpt, trust=trust)
    module, _, _ = run_module(state, ckpt)
    if module is not None:
        encoder, eval_pooling = module.encoder, module.eval_pooling
    else:
        hp = state.get("hyper_parameters") or {}
        if "backbone" not in hp:
            raise ModelLoadError(
                f"Checkpoint '{ckpt}' has no 'backbone' hyper-parameter and no {run_folder.CONFIG} beside its run "
                "directory; cannot tell which encoder it holds (give a checkpoint run.py wrote)."
            )
        encoder = TextEncoder.from_name(hp["backbone"], EncoderSettings.outside_training(
            hp.get("pooling", "mean"), hp.get("max_length", 32), hp.get("prompt_templates")))
        encoder.load_state_dict(encoder_weights(state["state_dict"]))
        eval_pooling = hp.get("eval_pooling") or encoder.pooling
        log.info("rebuilt the encoder of %s from its hyper-parameters (no run config found)", ckpt)
    encoder.eval()
    if pooling == "cls" and encoder.mlp is None:
        warnings.warn(f"'{ckpt}': the run trained no cls MLP (pooling {encoder.pooling}); pooling cls evaluates the "
                      "raw [CLS] state (cls_before_pooler).", stacklevel=2)
        pooling = "cls_before_pooler"
    return encoder, pooling or eval_pooling


def _read_json(path: Path) -> dict | list:
    try:
        return json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as err:
        raise ModelLoadError(f"Cannot read '{path}': {err}") from err


def load_sentence_transformers_folder(folder: str | Path, pooling: str | None = None) -> tuple[TextEncoder, str]:
    """A sentence-transformers folder whose Transformer module is the folder itself (the usual
    layout) followed by Pooling (mean or cls), an optional Dense (SimCSE's cls MLP) and an
    optional Normalize. Normalisation is dropped with a warning: the evaluations here use
    unnormalised embeddings (cosine for STS is unaffected; KMeans is not)."""
    folder = Path(folder)
    modules = _read_json(folder / "modules.json")
    kinds = [m["type"].rsplit(".", 1)[-1] for m in modules]
    if not kinds or kinds[0] != "Transformer" or modules[0].get("path", "") not in ("", "."):
        raise ModelLoadError(
            f"'{folder}/modules.json' lists {kinds}; expected a Transformer stored in the folder itself first."
        )
    if len(kinds) < 2 or kinds[1] != "Pooling":
        raise ModelLoadError(f"'{folder}/modules.json' lists {kinds}; expected Pooling after the Transformer.")
    pool_cfg = _read_json(folder / modules[1]["path"] / "config.json")
    mode = pool_cfg.get("pooling_mode")
    if mode is None:  # sentence-transformers < 6 wrote one boolean per mode
        mode = (
            "cls"
            if pool_cfg.get("pooling_mode_cls_token")
            else "mean"
            if pool_cfg.get("pooling_mode_mean_tokens")
            else None
        )
    rest = kinds[2:]
    if "Normalize" in rest:
        warnings.warn(
            f"{folder}: the Normalize module is ignored; embeddings are evaluated unnormalised.", stacklevel=2
        )
        rest = [k for k in rest if k != "Normalize"]
    if mode == "mean" and not rest:
        native = "mean"
    elif mode == "cls" and not rest:
        native = "cls_before_pooler"
    elif mode == "cls" and rest == ["Dense"]:
        native = "cls"
    else:
        raise ModelLoadError(f"'{folder}': pooling mode {mode!r} followed by {rest} is not supported here.")
    encoder = TextEncoder.from_name(str(folder), EncoderSettings.outside_training(native))
    # sentence-transformers < 6 wrote max_seq_length into sentence_bert_config.json; 6.x keeps it as
    # the saved tokenizer's model_max_length
    st_cfg = folder / "sentence_bert_config.json"
    saved = _read_json(st_cfg).get("max_seq_length") if st_cfg.is_file() else None
    limit = saved or encoder.tokenizer.model_max_length
    encoder.max_length = int(min(limit, encoder.backbone.config.max_position_embeddings))
    if native == "cls":
        dense_dir = folder / modules[kinds.index("Dense")]["path"]
        weights = _load_dense_weights(dense_dir)
        encoder.mlp[0].load_state_dict({"weight": weights["linear.weight"], "bias": weights["linear.bias"]})
    encoder.eval()
    if pooling == "cls" and native != "cls":  # the folder holds no trained cls MLP (no Dense module)
        encoder.pooling, encoder.mlp = "cls", torch.nn.Sequential(torch.nn.Linear(encoder.dim, encoder.dim),
                                                                  torch.nn.Tanh())
        pooling = trained_pooler_or_cls_state(encoder, str(folder))
    return encoder, pooling or native


def _load_dense_weights(folder: Path) -> dict[str, torch.Tensor]:
    if (folder / "model.safetensors").is_file():
        from safetensors.torch import load_file

        return load_file(str(folder / "model.safetensors"))
    if (folder / "pytorch_model.bin").is_file():
        return load_checkpoint(folder / "pytorch_model.bin")  # tensors only: no code is unpickled
    raise ModelLoadError(f"Dense module folder '{folder}' has no model.safetensors or pytorch_model.bin.")


def trained_pooler_or_cls_state(encoder: TextEncoder, ref: str) -> str:
    """``--pooling cls`` on a model whose cls MLP was not trained with it (a Hub model, a plain Hugging Face
    or sentence-transformers folder): the MLP takes the weights of the model's own trained pooler (BERT's and
    RoBERTa's ``pooler``: dense + tanh, what ``cls`` computes), and the choice is logged. A model without a
    trained pooler is evaluated on the raw [CLS] state (``cls_before_pooler``) with a warning that names it,
    never through a randomly initialised MLP. Returns the pooling to evaluate with."""
    pooler = getattr(encoder.backbone, "pooler", None)
    dense = getattr(pooler, "dense", None)
    activation = getattr(pooler, "activation", None)
    untrained = [k for k in getattr(encoder.backbone, "newly_initialised", []) if k.startswith("pooler")]
    if isinstance(dense, torch.nn.Linear) and isinstance(activation, torch.nn.Tanh) and not untrained \
            and tuple(dense.weight.shape) == (encoder.dim, encoder.dim):
        encoder.mlp[0].load_state_dict(dense.state_dict())
        log.info("'%s': pooling cls uses the model's trained pooler (%s: dense + tanh on [CLS])", ref,
                 type(pooler).__name__)
        return "cls"
    why = "its pooler was not in the checkpoint (initialised at random)" if untrained else "it has no pooler"
    warnings.warn(f"'{ref}': pooling cls would go through a randomly initialised MLP ({why}); evaluating the raw "
                  "[CLS] state (cls_before_pooler) instead.", stacklevel=2)
    encoder.mlp = None
    encoder.pooling = "cls_before_pooler"
    return "cls_before_pooler"


def load_encoder(model_ref: str | Path, pooling: str | None = None,
                 trust_checkpoint: bool = False) -> tuple[TextEncoder, str]:
    """(encoder in eval mode on CPU, pooling to evaluate with) for any model reference.

    ``pooling`` overrides the pooling the reference implies (a run's ``eval_pooling``, a
    sentence-transformers folder's Pooling module, ``mean`` for plain Hugging Face models).
    ``trust_checkpoint``: the user's opt-in for a checkpoint holding more than tensors and plain values.
    """
    _check_pooling(pooling)
    ref = str(model_ref)
    path = Path(ref)
    if path.suffix == ".ckpt":
        return load_checkpoint_encoder(path, pooling, trust_checkpoint)
    if path.is_dir() and (RunFolder(path).config_file.is_file() or (path / run_folder.CHECKPOINTS).is_dir()):
        return load_checkpoint_encoder(run_checkpoint(path), pooling, trust_checkpoint)
    if path.is_dir() and (path / "modules.json").is_file():
        return load_sentence_transformers_folder(path, pooling)
    if path.is_dir() and not (path / "config.json").is_file():
        raise ModelLoadError(
            f"'{ref}' is a folder but neither a run directory ({run_folder.CONFIG}, {run_folder.CHECKPOINTS}/), a "
            "sentence-transformers folder (modules.json) nor a Hugging Face model folder (config.json)."
        )
    if not path.exists() and looks_like_path(ref):
        raise ModelLoadError(
            f"model '{ref}' does not exist (no such file or folder). Give a run folder, a .ckpt file, a "
            f"model folder, a Hub name such as sentence-transformers/all-MiniLM-L6-v2, or {' / '.join(ALIASES)}."
        )
    try:
        encoder = TextEncoder.from_name(ref, EncoderSettings.outside_training(pooling or "mean"))
    except BackboneUnavailableError as err:
        raise ModelLoadError(
            f"model '{ref}' is not a local file or folder, and loading it from the Hugging Face Hub failed (no "
            f"network, a wrong name, or no access). Give a run folder, a .ckpt file, a local model folder, or "
            f"{' / '.join(ALIASES)} (offline)."
        ) from err
    encoder.eval()
    if pooling == "cls":
        pooling = trained_pooler_or_cls_state(encoder, ref)
    return encoder, pooling or "mean"


ALIASES = ("minilm", "tiny")


def looks_like_path(ref: str) -> bool:
    """A reference that can only be a local path: absolute, relative with ./ ../ ~, a file name with an
    extension, or deeper than a Hub ``org/name``."""
    if ref in ALIASES or ref.startswith("package:"):
        return False
    return (
        Path(ref).is_absolute()
        or ref.startswith((".", "~"))
        or ref.count("/") > 1
        or "\\" in ref
        or Path(ref).suffix.lower() in (".ckpt", ".pt", ".bin", ".safetensors", ".json")
    )
