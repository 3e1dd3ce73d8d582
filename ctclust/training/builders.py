"""What a run builds from its configuration: the DataModule, the method's LightningModule, the callbacks, the
loggers and the Trainer, and the process settings (seed, matmul precision, the speed settings left null)."""
from __future__ import annotations

import logging

import hydra
from omegaconf import DictConfig, OmegaConf

from lightning_modules.shared.precision import precision_trainer_kwargs
from runtime.multirun import hydra_config, is_multirun
from textcore import console
from textcore.errors import ConfigError

log = logging.getLogger(__name__)


def configure_process(cfg: DictConfig) -> None:
    """Seeds, the float32 matmul precision, and the speed settings left null (before config_resolved.yaml, which
    records the chosen values)."""
    import lightning as L
    import torch

    L.seed_everything(cfg.seed, workers=True)
    if cfg.get("float32_matmul_precision") is not None:
        torch.set_float32_matmul_precision(cfg.float32_matmul_precision)
        console.hide_matmul_precision_hint()  # the choice is the configuration's, not an oversight
    resolve_speed_settings(cfg)


def resolve_speed_settings(cfg: DictConfig) -> None:
    """Fill the speed settings left null (encoder chunks, DataLoader workers, pinned memory, ...) for the run's
    device, and state each with where it came from (textcore/device_settings.py)."""
    from omegaconf import open_dict

    from textcore.device_settings import SETTINGS, describe, resolve_settings, run_device

    device = run_device(cfg.trainer.get("accelerator"))
    resolved = resolve_settings({key: OmegaConf.select(cfg, key, default=None) for key in SETTINGS}, device)
    with open_dict(cfg):
        for key, (value, _) in resolved.items():
            OmegaConf.update(cfg, key, value, merge=False, force_add=True)
    log.info(describe(resolved, device))


def instantiate_datamodule(cfg: DictConfig):
    """The dataset's DataModule; a null ``num_clusters`` (unlabelled text) is not passed on."""
    data_cfg = OmegaConf.to_container(cfg.dataset, resolve=True)
    for key in ("name", "callbacks", "sample", "sample_settings"):  # read by validation.check_corpus
        data_cfg.pop(key, None)
    if data_cfg.get("num_clusters", 0) is None:
        data_cfg.pop("num_clusters")
    return hydra.utils.instantiate(data_cfg)


def instantiate_method(cfg: DictConfig, datamodule=None):
    """The method's LightningModule; ``method.name`` labels the run and is not an argument.

    A ``num_clusters`` left null (datasets that infer K from their labels) is taken from the
    datamodule. ``encoder_compile`` compiles the backbone (conf/config.yaml; docs/gpu.md).
    """
    method_cfg = OmegaConf.to_container(cfg.method, resolve=True)
    for key in ("name", "callbacks"):
        method_cfg.pop(key, None)
    if "num_clusters" in method_cfg and method_cfg["num_clusters"] in (None, "auto") and datamodule is not None:
        if not hasattr(datamodule, "num_clusters"):
            raise ConfigError(
                f"method.num_clusters is null but the dataset '{cfg.dataset.name}' has no classes to count; "
                "set method.num_clusters=<K>."
            )
        method_cfg["num_clusters"] = datamodule.num_clusters
    model = hydra.utils.instantiate(method_cfg)
    if cfg.get("encoder_compile"):
        model.encoder.compile_backbone()
    return model


def instantiate_callbacks(cfg: DictConfig) -> list:
    """General callbacks, then the dataset's evaluation callbacks, then the method's phases."""
    callbacks = []
    for group in (cfg.get("callbacks"), cfg.dataset.get("callbacks"), cfg.method.get("callbacks")):
        for callback_cfg in (group or {}).values():
            if callback_cfg and "_target_" in callback_cfg:
                callbacks.append(hydra.utils.instantiate(callback_cfg))
    return callbacks


def build_loggers(cfg: DictConfig) -> list:
    """The configured loggers; W&B's with :func:`wandb_settings`."""
    loggers = []
    for name, logger_cfg in (cfg.get("logger") or {}).items():
        if logger_cfg is None or "_target_" not in logger_cfg:
            continue
        if name == "wandb":
            logger_cfg = OmegaConf.merge(logger_cfg, wandb_settings(logger_cfg, cfg.paths.get("log_dir")))
        loggers.append(hydra.utils.instantiate(logger_cfg))
    return loggers


def wandb_settings(logger_cfg, log_dir) -> dict:
    """What the W&B logger's configuration leaves open: offline without an API key (``wandb sync`` uploads it
    later), and in a multirun, unless ``logger.wandb.group`` is set, the sweep folder as the group of every job's
    run (relative to ``paths.log_dir``, e.g. ``train/multiruns/2026-01-31_12-00-00``)."""
    from evaluation.across_runs.wandb_dashboard import has_wandb_credentials, sweep_group

    settings = {}
    if logger_cfg.get("offline") is None:
        settings["offline"] = not has_wandb_credentials()
        if settings["offline"]:
            log.info("W&B: no API key found, logging offline; upload later with `wandb sync`.")
    if not logger_cfg.get("group") and is_multirun():
        settings["group"] = sweep_group(hydra_config().sweep.dir, log_dir)
    return settings


def build_trainer(cfg: DictConfig, callbacks: list, loggers: list, extra_kwargs: dict):
    """The Trainer of ``cfg.trainer`` with ``callbacks``, ``loggers`` and ``extra_kwargs`` (the lifecycle's: plugins,
    strategy, ...); the run's configuration goes to every logger as its hyper-parameters."""
    kwargs = dict(extra_kwargs)
    # bf16/fp16 autocast with its weight-cast cache on (Lightning's is off; lightning_modules/shared/precision.py)
    kwargs.update(precision_trainer_kwargs(cfg.trainer.get("precision"), cfg.trainer.get("accelerator"),
                                           kwargs.get("plugins")))
    trainer = hydra.utils.instantiate(cfg.trainer, callbacks=callbacks, logger=loggers or False, **kwargs)
    for logger in loggers:
        logger.log_hyperparams(OmegaConf.to_container(cfg, resolve=True))
    return trainer
