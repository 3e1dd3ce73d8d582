"""W&B as the dashboard of a sweep: shared group, final numbers in the run summary, tables.

- ``sweep_group``: the W&B group of a sweep's runs, its folder relative to ``paths.log_dir`` (the run's logger
  joins it, ``ctclust.training.builders.wandb_settings``; the aggregate below logs into it);
- ``log_results``: the final numbers of results.json (objective, clustering final scores, STS,
  selection score) into the run summary, and the clustering before/after table and the STS
  table as W&B Tables (``clustering_table``, ``sts_table``).
- ``log_aggregate``: when a multirun ends, one more W&B run in the group (job_type
  ``aggregate``) holding the aggregate tables (``aggregate_clustering``, ``aggregate_sts``,
  ``aggregate_failed``).

Offline (no API key, or ``WANDB_MODE=offline``) all of this lands in the offline run files and
is uploaded by ``wandb sync``.
"""
from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Mapping

from evaluation.clustering import catalogue
from textcore.run_folder import is_finite_number

log = logging.getLogger(__name__)

# an evaluation entry's fields that describe it rather than score it
NOT_SCORES = ("step", "epoch", "texts", "kmeans_fitted_on")


def has_wandb_credentials() -> bool:
    if os.environ.get("WANDB_API_KEY"):
        return True
    netrc = Path(os.environ.get("NETRC", Path.home() / ".netrc"))
    return netrc.exists() and "api.wandb.ai" in netrc.read_text(errors="ignore")


def sweep_group(sweep_dir: str | Path, log_dir: str | Path | None = None) -> str:
    sweep_dir = Path(str(sweep_dir))
    try:
        return str(sweep_dir.resolve().relative_to(Path(str(log_dir)).resolve())) if log_dir else sweep_dir.name
    except ValueError:
        return sweep_dir.name


def summary_numbers(results: Mapping) -> dict:
    """The final numbers worth a W&B summary entry, as fractions (results.json's scale)."""
    out = {}
    objective = results.get("objective") or {}
    if is_finite_number(objective.get("value")):
        out["objective"] = objective["value"]
        out["objective_name"] = objective["name"]
    for section, prefix in (("final", "final"), ("before", "before")):
        entry = (results.get("clustering") or {}).get(section) or {}
        out.update({f"{prefix}/{k}": v for k, v in entry.items() if is_finite_number(v) and k not in NOT_SCORES
                    and not k.endswith("seconds")})
    sts = results.get("sts") or {}
    out.update({f"sts/{task}": v for task, v in (sts.get("spearman") or {}).items() if is_finite_number(v)})
    if is_finite_number(sts.get("avg")):
        out["sts/avg"] = sts["avg"]
    selection = results.get("sts_selection") or {}
    if is_finite_number(selection.get("best")):
        out["sts_selection/best"] = selection["best"]
        out["sts_selection/best_step"] = selection.get("best_step")
    if is_finite_number((sts.get("dev") or {}).get("spearman")):
        out["sts/dev"] = sts["dev"]["spearman"]
    headline = (results.get("final_evaluation") or {}).get("headline") or {}
    out.update({f"final_evaluation/{k}": v for k, v in headline.items() if is_finite_number(v)})
    for key in ("steps", "train_wall_seconds"):
        if is_finite_number(results.get(key)):
            out[key] = results[key]
    return out


def _wandb_loggers(loggers) -> list:
    try:
        from lightning.pytorch.loggers import WandbLogger
    except ImportError:  # pragma: no cover - lightning is a dependency
        return []
    return [lg for lg in loggers if isinstance(lg, WandbLogger)]


def log_results(loggers, results: Mapping) -> None:
    """Summary numbers and the clustering/STS tables of one run into its W&B run (if any)."""
    wandb_loggers = _wandb_loggers(loggers)
    if not wandb_loggers:
        return
    from evaluation.run_report.summary import summary_rows

    clustering = summary_rows(results)
    sts = results.get("sts") or {}
    for logger in wandb_loggers:
        logger.experiment.summary.update(summary_numbers(results))
        if clustering:
            columns = list(clustering[0])
            logger.log_table("clustering_table", columns=columns, data=[list(r.values()) for r in clustering])
        if sts.get("spearman"):
            rows = [[task, round(100 * v, 2)] for task, v in sts["spearman"].items() if is_finite_number(v)]
            rows.append(["avg", round(100 * sts["avg"], 2) if is_finite_number(sts.get("avg")) else None])
            logger.log_table("sts_table", columns=["task", "spearman x100"], data=rows)


def aggregate_tables(agg: Mapping) -> dict[str, tuple[list[str], list[list]]]:
    """The aggregate as flat (columns, rows) tables for W&B: one line per row and column."""
    tables = {}
    rows = []
    for row in agg["clustering"]["rows"]:
        for dataset, cell in row["cells"].items():
            for metric in catalogue.label_names():
                if metric in cell:
                    c = cell[metric]
                    rows.append([row["label"], row["predictions"], dataset, metric, c["mean"], c["std"], c["n"]])
    if rows:
        tables["aggregate_clustering"] = (["method", "predictions", "dataset", "metric", "mean", "std", "n"], rows)
    rows = []
    for row in agg["sts"]["rows"]:
        for task, c in row["cells"].items():
            rows.append([row["label"], row["trained_on"], task, c["mean"], c["std"], c["n"]])
    if rows:
        tables["aggregate_sts"] = (["method", "trained on", "task", "mean", "std", "n"], rows)
    failed = [[f["run"], f["method"], f["dataset"], str(f["seed"]), str(f["reason"])] for f in agg["failed"]]
    if failed:
        tables["aggregate_failed"] = (["run", "method", "dataset", "seed", "reason"], failed)
    return tables


def log_aggregate(agg: Mapping, config, sweep_dir: Path) -> None:
    """One W&B run (job_type ``aggregate``) in the sweep's group holding the aggregate tables."""
    import wandb


    wandb_cfg = config.logger.wandb
    offline = wandb_cfg.get("offline")
    if offline is None:
        offline = not has_wandb_credentials()
    group = wandb_cfg.get("group") or sweep_group(sweep_dir, config.paths.get("log_dir"))
    run = wandb.init(project=wandb_cfg.get("project"), group=group, job_type="aggregate",
                     name=f"aggregate {group}", dir=str(sweep_dir), mode="offline" if offline else "online",
                     config={"sweep_dir": str(sweep_dir), "std": agg["std"], "scale": agg["scale"]})
    try:
        for key, (columns, rows) in aggregate_tables(agg).items():
            run.log({key: wandb.Table(columns=columns, data=rows)})
        run.summary.update({"runs": agg["runs"], "failed": len(agg["failed"])})
    finally:
        run.finish()
    log.info("W&B: aggregate tables logged to group %s (%s)", group, "offline" if offline else "online")
