"""Train and evaluate a method: `python run.py method=sccl dataset=stackoverflow`.

Hydra composes conf/config.yaml; see README.md for the config groups and examples.
"""
from __future__ import annotations

import contextlib
import json
import logging
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent
os.environ.setdefault("PROJECT_ROOT", str(ROOT))
# the tokenizers' worker threads fight the DataLoader's on 2-core machines
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import hydra  # noqa: E402
from omegaconf import DictConfig, OmegaConf  # noqa: E402

import validation  # noqa: E402
from ctclust.run_control import RunControl  # noqa: E402
from evaluation.across_runs.wandb_dashboard import (  # noqa: E402
    has_wandb_credentials,
    log_results,
    wandb_group_settings,
)
from launching import objective  # noqa: E402
from launching.hydra_callbacks import finished_job, record_sweep_failure  # noqa: E402
from lightning_modules.shared.precision import precision_trainer_kwargs, register_precision_resolver  # noqa: E402
from textcore import console, run_folder  # noqa: E402
from textcore.errors import USER_ERROR_EXIT_CODE, ConfigError, report_user_error_or_raise, writing  # noqa: E402

register_precision_resolver()  # ${gpu_precision:} in conf/trainer/gpu.yaml

log = logging.getLogger("run")

def build_loggers(cfg: DictConfig) -> list:
    loggers = []
    for name, logger_cfg in (cfg.get("logger") or {}).items():
        if logger_cfg is None or "_target_" not in logger_cfg:
            continue
        if name == "wandb" and logger_cfg.get("offline") is None:
            offline = not has_wandb_credentials()
            if offline:
                log.info("W&B: no API key found, logging offline; upload later with `wandb sync`.")
            logger_cfg = OmegaConf.merge(logger_cfg, {"offline": offline})
        if name == "wandb":  # the jobs of one multirun share a group
            logger_cfg = OmegaConf.merge(logger_cfg, wandb_group_settings(logger_cfg, cfg.paths.get("log_dir")))
        loggers.append(hydra.utils.instantiate(logger_cfg))
    return loggers


def instantiate_method(cfg: DictConfig, datamodule=None):
    """The method's LightningModule; ``method.name`` labels the run and is not an argument.

    A ``num_clusters`` left null (datasets that infer K from their labels) is taken from the
    datamodule.
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
    return hydra.utils.instantiate(method_cfg)


def instantiate_datamodule(cfg: DictConfig):
    """The dataset's DataModule; a null ``num_clusters`` (unlabelled text) is not passed on."""
    data_cfg = OmegaConf.to_container(cfg.dataset, resolve=True)
    for key in ("name", "callbacks", "sample", "sample_settings"):  # read by validation.check_corpus
        data_cfg.pop(key, None)
    if data_cfg.get("num_clusters", 0) is None:
        data_cfg.pop("num_clusters")
    return hydra.utils.instantiate(data_cfg)


def resolve_auto_clusters(cfg: DictConfig, datamodule, output_dir: Path) -> dict | None:
    """``dataset.num_clusters=auto``: choose K from the training texts, without labels, before training.

    The texts are embedded by the untrained backbone with the method's pooling and the run's token
    limit, and ``evaluation.clustering.choose_k`` scans ``choose_k.k`` under ``choose_k.rule``. The choice is kept in
    ``<run>/choose_k/choose_k.json``, so a resumed run reuses it instead of choosing again.
    """
    if getattr(datamodule, "requested_clusters", None) != "auto":
        return None
    from evaluation.clustering.choose_k import choose_k, scan_rows, write_outputs
    from textcore.device_settings import OUTSIDE_TRAINING
    from textcore.encoding.encoder import EncoderSettings, TextEncoder

    folder = output_dir / "choose_k"
    saved = folder / "choose_k.json"
    if saved.is_file():
        result = json.loads(saved.read_text())
        log.info("num_clusters=auto: K=%d, as chosen before (%s)", result["recommended"]["k"], saved)
    else:
        settings = cfg.get("choose_k") or {}
        pooling = cfg.method.get("pooling") or "mean"
        # embedded and clustered on the CPU before training, as the evaluation tools do
        encoder = TextEncoder.from_name(cfg.backbone.name, EncoderSettings.outside_training(
            pooling, int(cfg.max_length))).eval()
        texts = datamodule.texts
        keep = scan_rows(len(texts), int(settings.get("max_texts", 5000)))
        if keep is not None:  # the scan's seeded sample is all that is embedded
            texts = [texts[i] for i in keep]
        log.info("num_clusters=auto: embedding %d texts with the untrained %s and scanning K=%s",
                 len(texts), cfg.backbone.name, settings.get("k", "2:60"))
        embeddings = encoder.encode(texts, batch_size=128).numpy()
        result = choose_k(embeddings, settings.get("k", "2:60"), int(settings.get("seeds", 5)),
                          settings.get("rule", "silhouette"), int(settings.get("silhouette_sample", 3000)),
                          kmeans_backend=OUTSIDE_TRAINING["kmeans_backend"], log=log.info,
                          max_texts=int(settings.get("max_texts", 5000)))
        with writing(saved):
            write_outputs(result, folder, f"{cfg.dataset.name} ({cfg.backbone.name}, before training)")
    datamodule.requested_clusters = int(result["recommended"]["k"])
    rec = result["recommended"]
    log.info("num_clusters=auto: K=%d (%s); HDBSCAN found %s clusters", rec["k"], rec["rule_text"],
             result["hdbscan"].get("clusters"))
    return {"k": rec["k"], "rule": rec["rule"], "rule_text": rec["rule_text"], "ks": result["ks"],
            "hdbscan_clusters": result["hdbscan"].get("clusters"), "details": str(saved)}


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


def instantiate_callbacks(cfg: DictConfig) -> list:
    """General callbacks, then the dataset's evaluation callbacks, then the method's phases."""
    callbacks = []
    for group in (cfg.get("callbacks"), cfg.dataset.get("callbacks"), cfg.method.get("callbacks")):
        for callback_cfg in (group or {}).values():
            if callback_cfg and "_target_" in callback_cfg:
                callbacks.append(hydra.utils.instantiate(callback_cfg))
    return callbacks


def train(cfg: DictConfig) -> dict:
    """Fit the configured method and return the results written to results.json."""
    with contextlib.ExitStack() as held:  # the run folder's lock, released however the run ends
        return _train(cfg, held)


def _train(cfg: DictConfig, held: contextlib.ExitStack) -> dict:
    import lightning as L
    import torch

    began = time.perf_counter()
    validation.validate(cfg)  # settings, then files, then data: each problem is one message before any work
    sample = validation.check_corpus(cfg)
    output_dir = validation.check_output_dir(cfg) or Path(cfg.paths.output_dir)
    control = RunControl(cfg, output_dir)  # resume point, eval_only, signals, partial results.json
    held.enter_context(control.hold_folder())  # one folder, one run
    checkpoint_hparams = validation.check_checkpoint(cfg)
    L.seed_everything(cfg.seed, workers=True)
    if cfg.get("float32_matmul_precision") is not None:
        torch.set_float32_matmul_precision(cfg.float32_matmul_precision)
        console.hide_matmul_precision_hint()  # the choice is the configuration's, not an oversight
    resolve_speed_settings(cfg)  # before config_resolved.yaml, which records the chosen values
    with writing(output_dir / run_folder.CONFIG):
        (output_dir / run_folder.CONFIG).write_text(OmegaConf.to_yaml(cfg, resolve=True))

    datamodule = instantiate_datamodule(cfg)
    read_start = time.perf_counter()
    datamodule.setup("fit")
    read = time.perf_counter() - read_start
    auto_k = resolve_auto_clusters(cfg, datamodule, output_dir)
    validation.check_data(cfg, datamodule, checkpoint_hparams)
    model = instantiate_method(cfg, datamodule)
    if cfg.get("encoder_compile"):  # torch.compile of the backbone (conf/config.yaml; docs/gpu.md)
        model.encoder.compile_backbone()
    callbacks = instantiate_callbacks(cfg)
    objective.check_sources(cfg.get("objective"), [getattr(cb, "results_key", "") for cb in callbacks])
    loggers = build_loggers(cfg)
    trainer_kwargs = control.trainer_kwargs(cfg.trainer)
    # bf16/fp16 autocast with its weight-cast cache on (Lightning's is off; lightning_modules/shared/precision.py)
    trainer_kwargs.update(precision_trainer_kwargs(cfg.trainer.get("precision"), cfg.trainer.get("accelerator"),
                                                   trainer_kwargs.get("plugins")))
    trainer = hydra.utils.instantiate(cfg.trainer, callbacks=callbacks + control.callbacks(), logger=loggers or False,
                                      **trainer_kwargs)
    for logger in loggers:
        logger.log_hyperparams(OmegaConf.to_container(cfg, resolve=True))

    start = time.perf_counter()
    control.fit(trainer, model, datamodule)  # SIGTERM/SIGINT, NaN loss, failed final evaluation: see its docstring
    wall = time.perf_counter() - start

    results = {
        "method": cfg.method.name,
        "dataset": cfg.dataset.name,
        "backbone": cfg.backbone.name,
        "seed": cfg.seed,
        "steps": trainer.global_step,
        "epochs": trainer.current_epoch,
        "train_wall_seconds": round(wall, 1),
        "torch_threads": torch.get_num_threads(),
        "output_dir": str(output_dir),
        "checkpoint": str(output_dir / run_folder.LAST_CHECKPOINT),
        **control.results_fields(),
    }
    # where the time went (scripts/bench/scale.py): reading the data, then run_control.PhaseClock's phases
    results["seconds"] = {"read": round(read, 1), **results["seconds"], "total": round(time.perf_counter() - began, 1)}
    if sample is not None:  # evaluation.across_runs.paper_table sets such runs aside
        results["sample"] = sample
    if auto_k is not None:
        results["num_clusters_choice"] = auto_k
    for callback in callbacks:
        if hasattr(callback, "summary"):
            results[getattr(callback, "results_key", type(callback).__name__)] = callback.summary()
    clustering = results.get("clustering")
    if clustering:  # the headline numbers at the top level
        for key in ("final", "best", "best_step", "best_selected_with_labels"):
            results[key] = clustering[key]
    default = getattr(type(model), "default_objective", None)  # a module of the user's own may declare none
    results["objective"] = objective.objective_entry(cfg.get("objective"), default, results,
                                                    trainer.is_global_zero)
    if trainer.is_global_zero:
        with writing(output_dir / run_folder.RESULTS):
            (output_dir / run_folder.RESULTS).write_text(json.dumps(results, indent=2, default=float))
        log_results(loggers, results)  # W&B: run summary and tables
        if cfg.get("print_table", True):
            print_summary(results)
    for logger in loggers:
        logger.finalize("success")
    return results


def print_summary(results: dict) -> None:
    from rich.console import Console
    from rich.table import Table

    from evaluation.run_report.summary import summary_rows

    console = Console()
    rows = summary_rows(results)
    if rows:
        title = f"{results['method']} on {results['dataset']} ({results['backbone']}, {results['steps']} steps)"
        table = Table(title=title)
        for column in rows[0]:
            table.add_column(column, justify="left" if column == "what" else "right")
        for row in rows:
            table.add_row(*[str(v) for v in row.values()])
        console.print(table)
    console.print(f"results: {Path(results['output_dir']) / run_folder.RESULTS}")


@hydra.main(version_base="1.3", config_path="conf", config_name="config")
def main(cfg: DictConfig) -> float | None:
    console.configure()  # Lightning's log lines once, on stderr; no adverts
    try:
        earlier = finished_job(cfg)  # a resumed multirun does not train a job that finished before
        if earlier is not None:
            return objective.raise_if_error(earlier["objective"])
        results = train(cfg)
        return objective.raise_if_error(results["objective"])  # the `objective` key's number, for sweepers
    except Exception as err:  # noqa: BLE001 - re-raised unless it is (or wraps) a user error
        user_error = report_user_error_or_raise(err)
        if record_sweep_failure(cfg, user_error):  # multirun: the other jobs go on; the sweep's table lists it
            return None
        sys.exit(USER_ERROR_EXIT_CODE)


if __name__ == "__main__":
    main()
