"""Train and evaluate the configured method: ``train(cfg)`` from a composed configuration to its results.

``python run.py`` calls :func:`run_job`; the Python API and the tests call :func:`train` with a config composed
for them (``paths.output_dir`` set). Both raise every error: a user error (``textcore.errors.UserError``) has a
message for one line; :class:`~ctclust.training.lifecycle.RunStopped` is a run stopped by a signal.
"""
from __future__ import annotations

import logging
import time
from pathlib import Path

from omegaconf import DictConfig, OmegaConf

import validation
from ctclust.training.auto_clusters import resolve_auto_clusters
from ctclust.training.builders import (
    build_loggers,
    build_trainer,
    configure_process,
    instantiate_callbacks,
    instantiate_datamodule,
    instantiate_method,
)
from ctclust.training.lifecycle import RunLifecycle
from ctclust.training.results import print_results
from lightning_modules.shared.precision import register_precision_resolver
from runtime import objective
from runtime.multirun import finished_job
from textcore import run_folder
from textcore.atomic_files import atomic_write_text
from textcore.errors import writing

register_precision_resolver()  # ${gpu_precision:} in conf/trainer/gpu.yaml

log = logging.getLogger(__name__)


def train(cfg: DictConfig) -> dict:
    """Fit the configured method and return the results written to results.json."""
    validation.validate(cfg)  # settings, then files, then data: each problem is one message before any work
    sample = validation.check_corpus(cfg)
    output_dir = validation.check_output_dir(cfg) or Path(cfg.paths.output_dir)
    with RunLifecycle(cfg, output_dir) as run:  # the folder's lock; where training starts (sets cfg.ckpt_path)
        run.start_checkpoint = validation.check_checkpoint(cfg)  # read once: the trainer resumes from this dict
        checkpoint_hparams = dict(run.start_checkpoint.get("hyper_parameters") or {}) \
            if run.start_checkpoint is not None else None
        configure_process(cfg)
        with writing(output_dir / run_folder.CONFIG, atomic=True):
            atomic_write_text(output_dir / run_folder.CONFIG, OmegaConf.to_yaml(cfg, resolve=True))

        datamodule = instantiate_datamodule(cfg)
        read_start = time.perf_counter()
        datamodule.setup("fit")
        run.known["seconds"] = {"read": round(time.perf_counter() - read_start, 1)}
        if sample is not None:  # evaluation.across_runs.paper_table sets such runs aside
            run.known["sample"] = sample
        auto_k = resolve_auto_clusters(cfg, datamodule, output_dir)
        if auto_k is not None:
            run.known["num_clusters_choice"] = auto_k
        validation.check_data(cfg, datamodule, checkpoint_hparams)
        model = instantiate_method(cfg, datamodule)
        callbacks = instantiate_callbacks(cfg)
        objective.check_sources(cfg.get("objective"), [getattr(cb, "results_key", "") for cb in callbacks])
        loggers = build_loggers(cfg)
        trainer = build_trainer(cfg, callbacks + run.callbacks(), loggers, run.trainer_kwargs(cfg.trainer))

        run.fit(trainer, model, datamodule)  # signals, NaN loss, a failed final evaluation: lifecycle.py
        results = run.finish(trainer)  # results.json
    if trainer.is_global_zero:
        from evaluation.across_runs.wandb_dashboard import log_results

        log_results(loggers, results)  # W&B: run summary and tables
        if cfg.get("print_table", True):
            print_results(results)
    for logger in loggers:
        logger.finalize("success")
    return results


def run_job(cfg: DictConfig) -> float | None:
    """What ``python run.py`` does with its composed configuration: train, and return the ``objective`` number for
    a sweeper (an ``ObjectiveError`` when the run has no such number). A job of a resumed multirun that finished
    before is not trained again: its recorded objective is returned."""
    earlier = finished_job(cfg)
    results = earlier if earlier is not None else train(cfg)
    return objective.raise_if_error(results["objective"])
