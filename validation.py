"""Checks of a run before any work is done: one place, one message per problem.

``run.py`` calls, in this order:

1. :func:`validate` (pure: the composed configuration only) — the method trains on this kind of
   dataset, batch size >= 2, learning rates > 0, max_length >= 1, temperatures > 0, K >= 2,
   ClusterNS's K <= the global batch, a step or epoch budget, a known text encoding;
2. :func:`check_corpus`, :func:`check_output_dir` and :func:`check_checkpoint` — a corpus of the download
   catalogue is there (else one line naming its URL and download command; ``dataset.sample=true`` switches
   to the dataset's sample), the run folder can be written, and
   ``ckpt_path`` exists, is a readable Lightning checkpoint, was written by the configured method
   and with the configured backbone;
3. :func:`check_data`, after ``datamodule.setup`` and before the model (and its backbone) is built
   — enough texts, K <= distinct texts, the checkpoint's K equals the data's.

Each failure raises a :class:`errors.UserError` subclass whose message names the key, its value
and the fix; entry points print it as one line without a traceback.

Which datasets a method trains on is what the classes say: a method's ``trains_on`` against a
datamodule's ``data_kind`` (SCCL and AECL cluster short texts; SimCSE and ClusterNS learn from
sentences and also run on short texts; PairSupCon needs NLI pairs). A method's own checks are its
``check_config`` and ``min_batch_size`` (``lightning_modules.shared.base``).

:class:`OutputFolderCheck` is a Hydra callback (``conf/hydra/default.yaml``) that checks the run
folder can be created before Hydra itself tries (which would end in a traceback).
"""
from __future__ import annotations

import math
import numbers
import tempfile
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf, open_dict

from errors import USER_ERROR_EXIT_CODE, ConfigError, MissingFileError, OutputWriteError, UserError
from lightning_modules.shared.base import DATA_KIND_NAMES, ENCODER_SETTINGS, SENTENCES, SHORT_TEXT
from lightning_modules.shared.registry import ClassPathError, import_class, same_class

ROOT = Path(__file__).resolve().parent
CONF = ROOT / "conf"

class CheckpointError(UserError, ValueError):
    """``ckpt_path`` cannot be resumed from; the message says why and what to do."""


# -- helpers -------------------------------------------------------------------------------------
_ABSENT = object()  # a key the configuration does not have, unlike one set to null


def _select(cfg: DictConfig, key: str, default: Any = None) -> Any:
    return OmegaConf.select(cfg, key, default=default)


def _is_number(value: Any) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def _is_int(value: Any) -> bool:
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def _target(cfg: DictConfig, group: str) -> str | None:
    return _select(cfg, f"{group}._target_")


def _class(target: str | None) -> type | None:
    """The class a ``_target_`` names, or None (a target of the user's own that does not import is left
    to Hydra's instantiation, which names the problem)."""
    if not target:
        return None
    try:
        return import_class(target)
    except ClassPathError:
        return None


def _data_kind(target: str | None) -> str | None:
    return getattr(_class(target), "data_kind", None)


def _method_class(cfg: DictConfig) -> type | None:
    cls = _class(_target(cfg, "method"))
    return cls if hasattr(cls, "trains_on") else None


def _name(cfg: DictConfig, group: str) -> str:
    """What the user chose for ``group`` (``dataset=csv``, not the file name the csv config calls itself)."""
    try:
        from hydra.core.hydra_config import HydraConfig

        choice = HydraConfig.get().runtime.choices.get(group)
        if choice:
            return str(choice)
    except (ImportError, ValueError):  # not inside a Hydra run (tests, notebooks)
        pass
    return str(_select(cfg, f"{group}.name") or _target(cfg, group) or group)


def _yaml_configs(group: str) -> dict[str, dict]:
    """``conf/<group>/<name>.yaml`` as plain dicts (a ``_global_`` dataset file's ``dataset`` subtree),
    each merged over the files of its ``defaults`` list."""
    raw = {}
    for path in sorted((CONF / group).glob("*.yaml")):
        data = OmegaConf.to_container(OmegaConf.load(path), resolve=False) or {}
        if "_target_" not in data and isinstance(data.get(group), dict):
            data = {**data[group], "defaults": data.get("defaults", [])}
        raw[path.stem] = data

    def merged(name: str, seen: tuple = ()) -> dict:
        data = dict(raw.get(name, {}))
        out: dict = {}
        for parent in data.pop("defaults", None) or []:
            if isinstance(parent, str) and parent in raw and parent not in seen:
                out.update(merged(parent, seen + (name,)))
        out.update(data)
        return out

    return {name: merged(name) for name in raw}


def datasets_for(method_target: str) -> list[str]:
    """Names of the dataset configs a method trains on (``conf/dataset``)."""
    kinds = getattr(_class(method_target), "trains_on", ())
    return [name for name, data in _yaml_configs("dataset").items() if _data_kind(data.get("_target_")) in kinds]


def method_names() -> dict[str, str]:
    """Method class path -> its ``method=`` name (``conf/method``). Where several configs share a class
    (``promptbert`` is SimCSE with templates), the config that does not inherit another one names it."""
    names: dict[str, str] = {}
    for name, data in _yaml_configs("method").items():
        target = data.get("_target_")
        if not target:
            continue
        parents = OmegaConf.load(CONF / "method" / f"{name}.yaml").get("defaults") or []
        inherits = any(isinstance(parent, str) and (CONF / "method" / f"{parent}.yaml").is_file() for parent in parents)
        if target not in names or not inherits:
            names[target] = data.get("name", name)
    return names


# -- 1. the configuration ------------------------------------------------------------------------
def validate(cfg: DictConfig) -> None:
    """Check the composed configuration (no data file is read); raise ``ConfigError`` on the first problem."""
    check_pairing(cfg)
    check_batch_size(cfg)
    check_learning_rates(cfg)
    check_max_length(cfg)
    check_temperatures(cfg)
    check_num_clusters(cfg)
    check_method(cfg)
    check_accumulation(cfg)
    check_budget(cfg)
    check_encoding(cfg)
    check_matmul_precision(cfg)


def check_pairing(cfg: DictConfig) -> None:
    method_target, data_target = _target(cfg, "method"), _target(cfg, "dataset")
    kinds, kind = getattr(_method_class(cfg), "trains_on", None), _data_kind(data_target)
    if kinds is None or kind is None or kind in kinds:
        return  # a method or datamodule of the user's own is not second-guessed
    method, dataset = _name(cfg, "method"), _name(cfg, "dataset")
    options = datasets_for(method_target)
    example = "demo" if "demo" in options else (options[0] if options else "...")
    needs = " or ".join(DATA_KIND_NAMES[k] for k in kinds)
    raise ConfigError(
        f"method={method} does not train on dataset={dataset}: {method} needs {needs}, and dataset={dataset} "
        f"holds {DATA_KIND_NAMES[kind]}. Datasets for method={method}: {', '.join(options)} "
        f"(e.g. `python run.py method={method} dataset={example}`)."
    )


def check_batch_size(cfg: DictConfig) -> None:
    method = _method_class(cfg)
    minimum = method.min_batch_size(_select(cfg, "method")) if method is not None else 2
    for key in ("batch_size", "dataset.batch_size"):
        value = _select(cfg, key)
        if value is None and key == "dataset.batch_size":
            continue
        if not _is_int(value):
            raise ConfigError(f"{key}={value!r} is not an integer; set {key}=<texts per batch>, e.g. {key}=64.")
        if value >= minimum:
            continue
        if value == 1:
            raise ConfigError(
                f"{key}=1: the contrastive losses compare each text with the other texts of its batch; with one "
                f"text per batch they are identically 0 and nothing is learned. Set {key}=2 or more (default 64)."
            )
        raise ConfigError(f"{key}={value}: a batch needs at least {minimum} texts; set {key}=64 (the default) or "
                          f"another value >= {minimum}.")


def check_learning_rates(cfg: DictConfig) -> None:
    for key in ("method.lr", "method.head_lr_multiplier", "method.optimizer.lr"):
        value = _select(cfg, key, _ABSENT)
        if value is _ABSENT:  # no such setting (a partial optimiser without lr, a method of one's own); null is
            continue  # a setting, and the optimiser would multiply by it
        if not _is_number(value) or not math.isfinite(value) or value <= 0:
            what = "the head learning rate is method.lr times this" if "multiplier" in key else "a learning rate"
            raise ConfigError(
                f"{key}={value!r}: {what} must be a number > 0 (a negative rate climbs the loss instead of "
                f"descending it; 0 trains nothing). Set e.g. {key}={_default(key)}."
            )
    decay = _select(cfg, "method.optimizer.weight_decay")
    if decay is not None and (not _is_number(decay) or not 0 <= decay < math.inf):
        raise ConfigError(f"method.optimizer.weight_decay={decay!r} must be >= 0; e.g. 0 or 0.01.")


def _default(key: str) -> str:
    return {"method.lr": "5e-6", "method.head_lr_multiplier": "100", "method.optimizer.lr": "5e-6"}.get(key, "1")


def check_max_length(cfg: DictConfig) -> None:
    for key in ("max_length", "method.max_length", "dataset.max_length"):
        value = _select(cfg, key, _ABSENT)
        if value is _ABSENT:  # a dataset that cuts nothing itself; null would turn truncation off
            continue
        if not _is_int(value) or value < 1:
            raise ConfigError(
                f"{key}={value!r}: texts are cut to this many tokens, so it must be an integer >= 1 (0 turns "
                f"truncation off and a long text then overflows the backbone). Set {key}=32 (the papers' value)."
            )
        backbone = _select(cfg, "backbone.name")
        limit = backbone_token_limit(backbone) if backbone else None
        if limit is not None and value > limit:
            raise ConfigError(
                f"{key}={value}: backbone '{backbone}' reads at most {limit} tokens (its position embeddings), so a "
                f"longer text would stop the run. Set {key} <= {limit} (the papers' value: 32)."
            )


TINY_POSITIONS = 128  # build_tiny_bert's max_position_embeddings (tests/test_fuzz_config.py checks they agree)


def backbone_token_limit(name: str) -> int | None:
    """Tokens a backbone reads, from its config files when they are on this machine (a local folder, the
    package MiniLM or the Hugging Face cache); None when they are not (the Hub is not asked)."""
    if name == "tiny":
        return TINY_POSITIONS
    import json

    try:
        from lightning_modules.shared.encoder import resolve_backbone_path

        folder = Path(resolve_backbone_path(name))
    except UserError:
        return None
    files = {f: folder / f for f in ("config.json", "tokenizer_config.json")}
    if not folder.is_dir():
        try:
            from huggingface_hub import try_to_load_from_cache

            files = {f: try_to_load_from_cache(name, f) for f in files}
        except Exception:  # noqa: BLE001 - not a Hub name, no cache: nothing known, nothing refused
            return None
    limits = []
    for file, path in files.items():
        if not isinstance(path, (str, Path)) or not Path(path).is_file():
            continue
        data = json.loads(Path(path).read_text(encoding="utf-8"))
        if file == "config.json" and _is_int(data.get("max_position_embeddings")):
            # RoBERTa-style models keep two positions for the padding offset
            offset = 2 if data.get("model_type") in ("roberta", "xlm-roberta", "camembert") else 0
            limits.append(data["max_position_embeddings"] - offset)
        if file == "tokenizer_config.json" and _is_int(data.get("model_max_length")) \
                and data["model_max_length"] < 10**6:  # "no limit" is written as a huge number
            limits.append(data["model_max_length"])
    return min(limits) if limits else None


def check_temperatures(cfg: DictConfig) -> None:
    method = _select(cfg, "method") or {}
    for key in method:
        if key in ("temperature", "alpha") or str(key).startswith("tau"):
            value = _select(cfg, f"method.{key}")
            if not _is_number(value) or not 0 < value < math.inf:  # inf: every similarity 0, nothing learned
                why = "a temperature divides similarities" if key != "alpha" else "the Student's t degrees of freedom"
                raise ConfigError(
                    f"method.{key}={value!r}: must be a finite number > 0 ({why}); use e.g. the default of "
                    f"conf/method/{_name(cfg, 'method')}.yaml."
                )


def check_num_clusters(cfg: DictConfig) -> None:
    data_k, method_k = _select(cfg, "dataset.num_clusters"), _select(cfg, "method.num_clusters")
    for key, value in (("dataset.num_clusters", data_k), ("method.num_clusters", method_k)):
        if value is None or (key == "method.num_clusters" and value == data_k):
            continue
        if key == "dataset.num_clusters" and value == "auto":
            continue  # chosen without labels before training (run.resolve_auto_clusters)
        if not _is_int(value) or value < 2:
            raise ConfigError(
                f"{key}={value!r}: clustering needs K >= 2 clusters (with K=1 every text is in the same cluster "
                f"and the clustering loss is identically 0). Set {key}=<K> with K >= 2."
            )


def devices_count(devices: Any) -> int | None:
    """Processes per node from ``trainer.devices`` (None when it is decided at run time: auto, -1)."""
    if _is_int(devices):
        return int(devices) if devices > 0 else None
    if isinstance(devices, str):
        text = devices.strip()
        if text.isdigit():
            return int(text) or None
        if "," in text:
            return len([d for d in text.split(",") if d.strip()])
        return None
    try:
        return len(list(devices))
    except TypeError:
        return None


def check_method(cfg: DictConfig) -> None:
    """The method's own checks (``check_config``), given the global batch when it is known."""
    method = _method_class(cfg)
    if method is None:
        return
    batch = _select(cfg, "dataset.batch_size", _select(cfg, "batch_size"))
    devices = devices_count(_select(cfg, "trainer.devices", 1))
    nodes = _select(cfg, "trainer.num_nodes", 1) or 1
    known = _is_int(batch) and devices is not None and _is_int(nodes)
    info = ({"per_device": batch, "devices": devices, "nodes": nodes, "total": batch * devices * nodes}
            if known else None)
    method.check_config(_select(cfg, "method"), info)


def check_accumulation(cfg: DictConfig) -> None:
    """Gradient accumulation shrinks the in-batch negatives of every step: refused for in-batch losses."""
    steps = _select(cfg, "trainer.accumulate_grad_batches", 1)
    method = _method_class(cfg)
    if not _is_int(steps) or steps <= 1 or method is None or method.min_batch_size(_select(cfg, "method")) < 2:
        return
    batch = _select(cfg, "dataset.batch_size", _select(cfg, "batch_size"))
    raise ConfigError(
        f"trainer.accumulate_grad_batches={steps}: {_name(cfg, 'method')} contrasts each text with the other texts "
        f"of its step, so accumulating {steps} batches of {batch} trains with the negatives of {batch}, not of "
        f"{steps * batch if _is_int(batch) else 'their sum'}. For the larger batch on the same memory set "
        f"batch_size={steps * batch if _is_int(batch) else '<the larger batch>'} trainer.accumulate_grad_batches=1 "
        "and encoder_grad_cache_tokens=2048 (cached gradients: the encoder runs in mini-batches of at most that many "
        "tokens, the loss sees the whole batch; docs/cached_gradients.md)."
    )


def check_budget(cfg: DictConfig) -> None:
    steps, epochs = _select(cfg, "trainer.max_steps", -1), _select(cfg, "trainer.max_epochs")
    for key, value in (("trainer.max_steps", steps), ("trainer.max_epochs", epochs)):
        if value is not None and (not _is_int(value) or value < -1):
            raise ConfigError(f"{key}={value!r}: a number of {key.split('_')[-1]} must be a whole number >= 1, or -1 "
                              "to use the other bound (e.g. trainer.max_steps=150 trainer.max_epochs=-1).")
    if steps == 0 or epochs == 0:
        key, value = ("trainer.max_steps", steps) if steps == 0 else ("trainer.max_epochs", epochs)
        raise ConfigError(f"{key}={value}: nothing would be trained; set {key} to a positive number "
                          "(e.g. trainer.max_steps=150) or -1 to use the other bound.")
    if steps in (-1, None) and epochs == -1:
        raise ConfigError(
            "trainer.max_steps=-1 and trainer.max_epochs=-1: training would never end. Set one of them, "
            "e.g. trainer.max_steps=150 or trainer.max_epochs=10."
        )


def check_encoding(cfg: DictConfig) -> None:
    encoding = _select(cfg, "dataset.encoding")
    if encoding is not None:
        from datamodules.text_io import check_encoding as check_codec

        check_codec(encoding, "dataset.encoding")


MATMUL_PRECISIONS = ("highest", "high", "medium")


def check_matmul_precision(cfg: DictConfig) -> None:
    value = _select(cfg, "float32_matmul_precision")
    if value is not None and value not in MATMUL_PRECISIONS:
        raise ConfigError(f"float32_matmul_precision={value}: must be one of {', '.join(MATMUL_PRECISIONS)} or null "
                          "(highest: true float32, the default; high: TF32 on GPU tensor cores)")


# -- 2. files: the corpus, the output folder and the checkpoint --------------------------------------
def corpus_path(cfg: DictConfig) -> tuple[Path | None, str]:
    """The file the dataset reads and the key that names it (``dataset.path``, or ``data_dir`` + ``dataset.file``)."""
    path = _select(cfg, "dataset.path")
    if path:
        return Path(str(path)), "dataset.path"
    file, folder = _select(cfg, "dataset.file"), _select(cfg, "dataset.data_dir")
    if file and folder:
        return Path(str(folder)) / str(file), "dataset.file"
    return None, "dataset.file"


def check_corpus(cfg: DictConfig) -> dict | None:
    """A run trains on its corpus, or on a sample only when asked; what results.json records about a sample.

    ``dataset.sample=true`` merges ``dataset.sample_settings`` into ``dataset`` (the stand-in the dataset
    config names) and returns what was read instead of what. Otherwise a file of the download catalogue
    (``datamodules/download/catalogue.py``) that is not there stops the run with one line naming it, its
    URL and the command that fetches it, before anything is loaded.
    """
    from datamodules.download import catalogue

    corpus, key = corpus_path(cfg)
    if bool(_select(cfg, "dataset.sample", False)):
        settings = _select(cfg, "dataset.sample_settings")
        if not settings:
            raise ConfigError(f"dataset.sample=true, but dataset={_name(cfg, 'dataset')} names no sample "
                              "(dataset.sample_settings); drop dataset.sample or point the dataset at a smaller file.")
        with open_dict(cfg):
            cfg.dataset = OmegaConf.merge(cfg.dataset, settings)
        read, _ = corpus_path(cfg)
        return {"file": str(read), "instead_of": str(corpus) if corpus else None}
    item = catalogue.for_file(corpus) if corpus is not None else None
    if item is None:
        return None
    if not corpus.exists():
        dest = catalogue.dest_of(corpus, item)
        stand_in = "; or train on its sample with dataset.sample=true" if _select(cfg, "dataset.sample_settings") \
            else ""
        raise MissingFileError(
            f"{key}: '{corpus}' is missing ({item.what.split(' (')[0].split(':')[0]}; from "
            f"{', '.join(catalogue.origins(item))}). "
            f"Get it with `{catalogue.download_command(item, dest)}` (or put the file there){stand_in}.")
    return {"file": str(corpus), "instead_of": None} if item.sample else None


def check_output_dir(cfg: DictConfig) -> Path | None:
    """The run folder exists (or is created) and a file can be written in it."""
    try:
        folder = _select(cfg, "paths.output_dir")
    except Exception:  # noqa: BLE001 - ${hydra:...} outside a Hydra run: nothing to check
        return None
    if not folder:
        return None
    folder = Path(folder)
    try:
        folder.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=folder, prefix=".write-test-"):
            pass
    except OSError as err:
        reason = folder_problem(folder) if not folder.is_dir() else None
        raise OutputWriteError(
            f"the run folder '{folder}' cannot be written ({reason or err.strerror or err}). Point the run at a "
            "writable folder with `hydra.run.dir=<folder>` (or `paths.log_dir=<folder>` for all runs)."
        ) from None
    return folder


def read_checkpoint(path: str | Path, key: str = "ckpt_path") -> dict:
    """``torch.load`` of a checkpoint (memory-mapped when possible), or ``CheckpointError`` naming ``key``."""
    import torch

    errors = []
    for mmap in (True, False):  # mmap needs the zip format (every torch.save since 1.6)
        try:
            return torch.load(path, map_location="cpu", weights_only=False, mmap=mmap)
        except Exception as err:  # noqa: BLE001 - any failure to read is the user's file, reported below
            errors.append(f"{type(err).__name__}: {str(err).strip().splitlines()[0][:160] if str(err).strip() else ''}")
    raise CheckpointError(
        f"{key}={path} is not a readable checkpoint ({errors[-1]}); it is probably truncated or corrupted, "
        "e.g. by an interrupted save or a full disk. Use another checkpoint of the run"
        + (", or drop ckpt_path to start from scratch." if key == "ckpt_path" else ".")
    )


def checkpoint_class(ckpt: dict, path: Path) -> str | None:
    """Class path of the module that wrote ``ckpt``: recorded in the file, in the run's
    config_resolved.yaml next to ``checkpoints/``, or inferred from its hyper-parameter names."""
    if isinstance(ckpt.get("module_class"), str):
        return ckpt["module_class"]
    for folder in (path.parent.parent, path.parent):
        config = folder / "config_resolved.yaml"
        if config.is_file():
            try:
                target = OmegaConf.select(OmegaConf.load(config), "method._target_")
            except Exception:  # noqa: BLE001 - an unreadable neighbour proves nothing
                target = None
            if target:
                return str(target)
    return infer_class(set((ckpt.get("hyper_parameters") or {}).keys()))


def infer_class(hparam_names: set[str]) -> str | None:
    """The method whose own constructor arguments are exactly ``hparam_names`` less the encoder settings."""
    import inspect

    own_names = set(hparam_names) - set(ENCODER_SETTINGS)
    if not own_names:
        return None
    for target in method_names():
        cls = _class(target)
        if cls is None:
            continue
        params = {name for name, p in inspect.signature(cls.__init__).parameters.items()
                  if name != "self" and p.kind is not p.VAR_KEYWORD}
        if params == own_names:
            return target
    return None


def check_checkpoint(cfg: DictConfig) -> dict | None:
    """``ckpt_path`` (when set) can be resumed by this run; returns its hyper-parameters."""
    path = _select(cfg, "ckpt_path")
    if not path:
        return None
    path = Path(str(path))
    if not path.exists():
        raise MissingFileError(
            f"ckpt_path={path} does not exist. Give the path of a checkpoint to resume, e.g. "
            "<run folder>/checkpoints/last.ckpt, or drop ckpt_path to start from scratch."
        )
    if path.is_dir():
        hint = path / "checkpoints" / "last.ckpt"
        raise CheckpointError(
            f"ckpt_path={path} is a folder; give the checkpoint file itself"
            + (f", e.g. ckpt_path={hint}." if hint.is_file() else ", e.g. <run folder>/checkpoints/last.ckpt.")
        )
    ckpt = read_checkpoint(path)
    if not isinstance(ckpt, dict) or "state_dict" not in ckpt:
        raise CheckpointError(
            f"ckpt_path={path} is a torch file but not a Lightning checkpoint (no 'state_dict'); give a checkpoint "
            "written by run.py (<run folder>/checkpoints/*.ckpt)."
        )
    hparams = dict(ckpt.get("hyper_parameters") or {})
    written_by, configured = checkpoint_class(ckpt, path), _target(cfg, "method")
    if written_by and configured and not same_class(written_by, configured):
        names = method_names()
        theirs = next((n for target, n in names.items() if same_class(target, written_by)), written_by)
        ours = _name(cfg, "method")
        raise CheckpointError(
            f"ckpt_path={path} was written by method '{theirs}' ({written_by}), but this run is method={ours}. "
            f"Resume it with `method={theirs}` (and the dataset it was trained on), or drop ckpt_path to train "
            f"{ours} from scratch."
        )
    backbone, ours = hparams.get("backbone"), _select(cfg, "method.backbone")
    if backbone and ours and str(backbone) != str(ours):
        raise CheckpointError(
            f"ckpt_path={path} was trained with backbone '{backbone}', but this run builds '{ours}'. "
            f"Resume with `backbone.name={backbone}` (or the backbone=<config> that gives it), or drop ckpt_path."
        )
    if "optimizer_states" not in ckpt:
        raise CheckpointError(
            f"ckpt_path={path} holds the weights only (no optimizer state; e.g. the STS selection's best.ckpt), so "
            "a run cannot continue from it. Resume from <run folder>/checkpoints/last.ckpt; to evaluate these "
            f"weights: `python -m evaluation.benchmarks.evaluate_model --model {path}`."
        )
    return hparams


# -- 3. the data ---------------------------------------------------------------------------------
def check_data(cfg: DictConfig, datamodule, checkpoint_hparams: dict | None = None) -> None:
    """Checks that need the data (after ``datamodule.setup``), before the model is built."""
    texts = getattr(datamodule, "texts", None) if _data_kind(_target(cfg, "dataset")) == SHORT_TEXT else None
    path = getattr(datamodule, "path", None)
    if texts is not None:
        batch = getattr(datamodule, "batch_size", None)
        if len(texts) < 2:
            raise ConfigError(f"'{path}' has {len(texts)} usable text(s); contrastive training needs at least 2. "
                              "Use a larger file.")
        if batch and getattr(datamodule, "drop_last", False) and len(texts) < batch:
            raise ConfigError(
                f"'{path}' has {len(texts)} texts, fewer than batch_size={batch}, and dataset.drop_last=true drops "
                f"the only, incomplete batch: no training step would run. Set batch_size <= {len(texts)} or "
                "dataset.drop_last=false."
            )
    dataset = getattr(datamodule, "dataset", None)
    if _data_kind(_target(cfg, "dataset")) == SENTENCES and dataset is not None and hasattr(dataset, "count_texts"):
        # one pass over the file now (cached for the loader's length): an undecodable byte anywhere in it
        # stops the run here, before the backbone is loaded, instead of in the middle of an epoch
        if dataset.count_texts() < 2:
            raise ConfigError(f"'{path}' has fewer than 2 sentences; contrastive training needs at least 2. "
                              "Point dataset.path at a larger file.")
    train_set = getattr(datamodule, "train_set", None)
    if train_set is not None and hasattr(train_set, "__len__") and getattr(datamodule, "drop_last", False):
        batch = getattr(datamodule, "batch_size", None)
        if batch and len(train_set) < batch:
            raise ConfigError(
                f"'{path}' has {len(train_set)} usable pairs, fewer than batch_size={batch}, and "
                "dataset.drop_last=true: no training step would run. Lower batch_size or set dataset.drop_last=false."
            )
    if checkpoint_hparams and "num_clusters" in checkpoint_hparams:
        theirs = checkpoint_hparams["num_clusters"]
        ours = _select(cfg, "method.num_clusters")
        if ours is None or ours == "auto":
            ours = getattr(datamodule, "num_clusters", None)
        if ours is not None and theirs is not None and int(theirs) != int(ours):
            raise CheckpointError(
                f"ckpt_path={_select(cfg, 'ckpt_path')} has K={theirs} clusters, but this run has K={ours} "
                f"(method.num_clusters / dataset.num_clusters of dataset={_name(cfg, 'dataset')}). Resume with the "
                f"dataset and K it was trained with (e.g. `dataset.num_clusters={theirs}`), or drop ckpt_path."
            )


# -- Hydra callback: the run folder before Hydra creates it ----------------------------------------
def _first_existing(path: Path) -> Path:
    while not path.exists() and path != path.parent:
        path = path.parent
    return path


def folder_problem(folder: str | Path) -> str | None:
    """Why ``folder`` (which may not exist yet) could not be created and written, or None."""
    folder = Path(folder)
    base = _first_existing(folder)
    if not base.is_dir():
        return f"'{base}' is a file, not a folder"
    try:
        probe = tempfile.mkdtemp(dir=base, prefix=".write-test-")
    except OSError as err:
        return f"'{base}' is not writable ({err.strerror or err})"
    Path(probe).rmdir()
    return None


try:
    from hydra.experimental.callback import Callback as _HydraCallback
except ImportError:  # pragma: no cover - hydra is a dependency
    _HydraCallback = object


class OutputFolderCheck(_HydraCallback):
    """Hydra callback: stops with one line (exit 2) when the run or sweep folder cannot be created.

    Hydra creates ``hydra.run.dir`` before it calls ``run.py``'s main, and a failure there ends in
    Hydra's own traceback; this check runs just before.
    """

    def _check(self, folder: str, key: str) -> None:
        import sys

        problem = folder_problem(folder)
        if problem:
            print(
                f"error: cannot create the run folder '{folder}': {problem}. Write elsewhere with `{key}=<folder>` "
                "or `paths.log_dir=<folder>`.",
                file=sys.stderr,
                flush=True,
            )
            sys.exit(USER_ERROR_EXIT_CODE)

    def on_run_start(self, config: DictConfig, **kwargs: Any) -> None:
        self._check(str(config.hydra.run.dir), "hydra.run.dir")

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        self._check(str(config.hydra.sweep.dir), "hydra.sweep.dir")
