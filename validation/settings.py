"""1. Checks of the composed configuration alone (pure: no file is read, nothing is built)."""
from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from omegaconf import DictConfig

from textcore.data_kinds import DATA_KIND_NAMES
from textcore.errors import ConfigError, UserError
from validation.lookup import (
    ABSENT,
    chosen_name,
    data_kind_of,
    datasets_for,
    is_int,
    is_number,
    method_class_of,
    select,
    target_of,
)
from validation.renamed_keys import check_renamed_keys


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
    check_renamed_keys(cfg)
    check_cluster_space(cfg)


def check_pairing(cfg: DictConfig) -> None:
    method_target, data_target = target_of(cfg, "method"), target_of(cfg, "dataset")
    kinds, kind = getattr(method_class_of(cfg), "trains_on", None), data_kind_of(data_target)
    if kinds is None or kind is None or kind in kinds:
        return  # a method or datamodule of the user's own is not second-guessed
    method, dataset = chosen_name(cfg, "method"), chosen_name(cfg, "dataset")
    options = datasets_for(method_target)
    example = "demo" if "demo" in options else (options[0] if options else "...")
    needs = " or ".join(DATA_KIND_NAMES[k] for k in kinds)
    raise ConfigError(
        f"method={method} does not train on dataset={dataset}: {method} needs {needs}, and dataset={dataset} "
        f"holds {DATA_KIND_NAMES[kind]}. Datasets for method={method}: {', '.join(options)} "
        f"(e.g. `python run.py method={method} dataset={example}`)."
    )


def check_batch_size(cfg: DictConfig) -> None:
    method = method_class_of(cfg)
    minimum = method.min_batch_size(select(cfg, "method")) if method is not None else 2
    for key in ("batch_size", "dataset.batch_size"):
        value = select(cfg, key)
        if value is None and key == "dataset.batch_size":
            continue
        if not is_int(value):
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
        value = select(cfg, key, ABSENT)
        if value is ABSENT:  # no such setting (a partial optimiser without lr, a method of one's own); null is
            continue  # a setting, and the optimiser would multiply by it
        if not is_number(value) or not math.isfinite(value) or value <= 0:
            what = "the head learning rate is method.lr times this" if "multiplier" in key else "a learning rate"
            raise ConfigError(
                f"{key}={value!r}: {what} must be a number > 0 (a negative rate climbs the loss instead of "
                f"descending it; 0 trains nothing). Set e.g. {key}={_default(key)}."
            )
    decay = select(cfg, "method.optimizer.weight_decay")
    if decay is not None and (not is_number(decay) or not 0 <= decay < math.inf):
        raise ConfigError(f"method.optimizer.weight_decay={decay!r} must be >= 0; e.g. 0 or 0.01.")


def _default(key: str) -> str:
    return {"method.lr": "5e-6", "method.head_lr_multiplier": "100", "method.optimizer.lr": "5e-6"}.get(key, "1")


def check_max_length(cfg: DictConfig) -> None:
    for key in ("max_length", "method.max_length", "dataset.max_length"):
        value = select(cfg, key, ABSENT)
        if value is ABSENT:  # a dataset that cuts nothing itself; null would turn truncation off
            continue
        if not is_int(value) or value < 1:
            raise ConfigError(
                f"{key}={value!r}: texts are cut to this many tokens, so it must be an integer >= 1 (0 turns "
                f"truncation off and a long text then overflows the backbone). Set {key}=32 (the papers' value)."
            )
        backbone = select(cfg, "backbone.name")
        limit = backbone_token_limit(backbone) if backbone else None
        if limit is not None and value > limit:
            raise ConfigError(
                f"{key}={value}: backbone '{backbone}' reads at most {limit} tokens (its position embeddings), so a "
                f"longer text would stop the run. Set {key} <= {limit} (the papers' value: 32)."
            )


TINY_POSITIONS = 128  # build_tiny_bert's max_position_embeddings (tests/fuzz/test_fuzz_config.py checks they agree)


def backbone_token_limit(name: str) -> int | None:
    """Tokens a backbone reads, from its config files when they are on this machine (a local folder, the
    package MiniLM or the Hugging Face cache); None when they are not (the Hub is not asked)."""
    if name == "tiny":
        return TINY_POSITIONS
    import json

    try:
        from textcore.encoding.backbone import resolve_backbone_path

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
        if file == "config.json" and is_int(data.get("max_position_embeddings")):
            # RoBERTa-style models keep two positions for the padding offset
            offset = 2 if data.get("model_type") in ("roberta", "xlm-roberta", "camembert") else 0
            limits.append(data["max_position_embeddings"] - offset)
        if file == "tokenizer_config.json" and is_int(data.get("model_max_length")) \
                and data["model_max_length"] < 10**6:  # "no limit" is written as a huge number
            limits.append(data["model_max_length"])
    return min(limits) if limits else None


def check_temperatures(cfg: DictConfig) -> None:
    method = select(cfg, "method") or {}
    for key in method:
        if key in ("temperature", "alpha") or str(key).startswith("tau"):
            value = select(cfg, f"method.{key}")
            if not is_number(value) or not 0 < value < math.inf:  # inf: every similarity 0, nothing learned
                why = "a temperature divides similarities" if key != "alpha" else "the Student's t degrees of freedom"
                raise ConfigError(
                    f"method.{key}={value!r}: must be a finite number > 0 ({why}); use e.g. the default of "
                    f"conf/method/{chosen_name(cfg, 'method')}.yaml."
                )


def check_num_clusters(cfg: DictConfig) -> None:
    data_k, method_k = select(cfg, "dataset.num_clusters"), select(cfg, "method.num_clusters")
    for key, value in (("dataset.num_clusters", data_k), ("method.num_clusters", method_k)):
        if value is None or (key == "method.num_clusters" and value == data_k):
            continue
        if key == "dataset.num_clusters" and value == "auto":
            continue  # chosen without labels before training (ctclust.training.auto_clusters)
        if not is_int(value) or value < 2:
            raise ConfigError(
                f"{key}={value!r}: clustering needs K >= 2 clusters (with K=1 every text is in the same cluster "
                f"and the clustering loss is identically 0). Set {key}=<K> with K >= 2."
            )


def devices_count(devices: Any) -> int | None:
    """Processes per node from ``trainer.devices`` (None when it is decided at run time: auto, -1)."""
    if is_int(devices):
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
    method = method_class_of(cfg)
    if method is None:
        return
    batch = select(cfg, "dataset.batch_size", select(cfg, "batch_size"))
    devices = devices_count(select(cfg, "trainer.devices", 1))
    nodes = select(cfg, "trainer.num_nodes", 1) or 1
    known = is_int(batch) and devices is not None and is_int(nodes)
    info = ({"per_device": batch, "devices": devices, "nodes": nodes, "total": batch * devices * nodes}
            if known else None)
    method.check_config(select(cfg, "method"), info)


def check_accumulation(cfg: DictConfig) -> None:
    """Gradient accumulation shrinks the in-batch negatives of every step: refused for in-batch losses."""
    steps = select(cfg, "trainer.accumulate_grad_batches", 1)
    method = method_class_of(cfg)
    if not is_int(steps) or steps <= 1 or method is None or method.min_batch_size(select(cfg, "method")) < 2:
        return
    batch = select(cfg, "dataset.batch_size", select(cfg, "batch_size"))
    raise ConfigError(
        f"trainer.accumulate_grad_batches={steps}: {chosen_name(cfg, 'method')} contrasts each text with the other "
        f"texts of its step, so accumulating {steps} batches of {batch} trains with the negatives of {batch}, not of "
        f"{steps * batch if is_int(batch) else 'their sum'}. For the larger batch on the same memory set "
        f"batch_size={steps * batch if is_int(batch) else '<the larger batch>'} trainer.accumulate_grad_batches=1 "
        "and encoder_grad_cache_tokens=2048 (cached gradients: the encoder runs in mini-batches of at most that many "
        "tokens, the loss sees the whole batch; docs/cached_gradients.md)."
    )


def check_budget(cfg: DictConfig) -> None:
    steps, epochs = select(cfg, "trainer.max_steps", -1), select(cfg, "trainer.max_epochs")
    for key, value in (("trainer.max_steps", steps), ("trainer.max_epochs", epochs)):
        if value is not None and (not is_int(value) or value < -1):
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
    encoding = select(cfg, "dataset.encoding")
    if encoding is not None:
        from datamodules.text_decoding import check_encoding as check_codec

        check_codec(encoding, "dataset.encoding")


MATMUL_PRECISIONS = ("highest", "high", "medium")


def check_matmul_precision(cfg: DictConfig) -> None:
    value = select(cfg, "float32_matmul_precision")
    if value is not None and value not in MATMUL_PRECISIONS:
        raise ConfigError(f"float32_matmul_precision={value}: must be one of {', '.join(MATMUL_PRECISIONS)} or null "
                          "(highest: true float32, the default; high: TF32 on GPU tensor cores)")


def check_cluster_space(cfg: DictConfig) -> None:
    """``cluster_space`` and its ``umap`` settings (textcore.cluster_space): a bad value names its key."""
    from textcore.cluster_space import settings_of

    settings_of(cfg)
