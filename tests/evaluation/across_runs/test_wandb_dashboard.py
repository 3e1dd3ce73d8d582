"""W&B as a sweep dashboard, offline: shared group, job type, summary numbers, tables."""
import json

import pytest

from evaluation.across_runs.wandb_dashboard import aggregate_tables, summary_numbers, sweep_group
from tests.helpers.sweeps import lean_callbacks, run_cli
from tests.helpers.wandb_records import offline_run


def test_summary_numbers_are_the_final_ones():
    results = {
        "objective": {"name": "clustering.final.kmeans_acc", "value": 0.6},
        "clustering": {"final": {"step": 4, "kmeans_acc": 0.6, "head_nmi": 0.5, "eval_seconds": 1.0},
                       "before": {"kmeans_acc": 0.3}},
        "sts": {"spearman": {"STSB": 0.7, "SICKR": float("nan")}, "avg": 0.7},
        "sts_selection": {"best": 0.8, "best_step": 125},
        "steps": 4,
    }
    numbers = summary_numbers(results)
    assert numbers["objective"] == 0.6 and numbers["objective_name"] == "clustering.final.kmeans_acc"
    assert numbers["final/kmeans_acc"] == 0.6 and numbers["final/head_nmi"] == 0.5
    assert numbers["before/kmeans_acc"] == 0.3
    assert "final/step" not in numbers and "final/eval_seconds" not in numbers and "sts/SICKR" not in numbers
    assert numbers["sts/STSB"] == 0.7 and numbers["sts_selection/best"] == 0.8


def test_sweep_group_is_the_folder_under_the_log_dir(tmp_path):
    sweep = tmp_path / "logs" / "train" / "multiruns" / "2026-01-01_00-00-00"
    assert sweep_group(sweep, tmp_path / "logs") == "train/multiruns/2026-01-01_00-00-00"
    assert sweep_group(sweep, tmp_path / "elsewhere") == "2026-01-01_00-00-00"


def test_aggregate_tables_flatten_rows():
    agg = {"clustering": {"rows": [{"label": "sccl", "predictions": "KMeans", "cells": {
        "demo": {"acc": {"mean": 60.0, "std": 1.0, "n": 2}, "runs": []}}}]},
        "sts": {"rows": []}, "failed": [{"run": "r", "method": "sccl", "dataset": "d", "seed": 1, "reason": "x"}]}
    tables = aggregate_tables(agg)
    assert tables["aggregate_clustering"][1] == [["sccl", "KMeans", "demo", "acc", 60.0, 1.0, 2]]
    assert tables["aggregate_failed"][1] == [["r", "sccl", "d", "1", "x"]] and "aggregate_sts" not in tables


@pytest.mark.slow
def test_multirun_shares_a_group_and_logs_summary_and_tables_offline(toy_corpus, tmp_path):
    from tests.helpers import toy_overrides

    sweep = tmp_path / "logs" / "train" / "multiruns" / "now"
    overrides = toy_overrides(toy_corpus, steps=2)
    proc = run_cli(["-m", *overrides, *lean_callbacks(overrides), "logger=wandb", "seed=0,1",
                    f"paths.log_dir={tmp_path / 'logs'}", f"hydra.sweep.dir={sweep}"],
                   WANDB_MODE="offline", WANDB_API_KEY="", NETRC=str(tmp_path / "no-netrc"))
    assert proc.returncode == 0, proc.stderr[-3000:]
    for job in ("0", "1"):
        (run_dir,) = list((sweep / job / "wandb").glob("offline-run-*"))
        info = offline_run(run_dir)
        results = json.loads((sweep / job / "results.json").read_text())
        assert info["group"] == "train/multiruns/now" and info["job_type"] == "sccl"
        assert info["summary"]["final/kmeans_acc"] == results["clustering"]["final"]["kmeans_acc"]
        assert info["summary"]["objective"] == results["objective"]["value"]
        assert any(key.startswith("clustering_table.") for key in info["history_keys"])  # a W&B Table
        assert list(run_dir.glob("files/media/table/clustering_table_*.table.json"))
    (aggregate_dir,) = list((sweep / "wandb").glob("offline-run-*"))
    info = offline_run(aggregate_dir)
    assert info["group"] == "train/multiruns/now" and info["job_type"] == "aggregate"
    assert any(key.startswith("aggregate_clustering.") for key in info["history_keys"])
    assert info["summary"]["runs"] == 2
    (table_file,) = list(aggregate_dir.glob("files/media/table/aggregate_clustering_*.table.json"))
    table = json.loads(table_file.read_text())
    acc = [row for row in table["data"] if row[1] == "KMeans" and row[3] == "acc"]
    assert len(acc) == 1 and acc[0][6] == 2  # one row per dataset and metric, over the two seeds


def test_sts_results_go_to_the_summary_and_a_table(tmp_path, monkeypatch):
    """log_results on an offline WandbLogger, as run.py calls it for an STS run."""
    from lightning.pytorch.loggers import WandbLogger

    from evaluation.across_runs.wandb_dashboard import log_results
    from launching.hydra_callbacks import finish_wandb_run

    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_SILENT", "true")
    logger = WandbLogger(project="test", save_dir=str(tmp_path), offline=True, job_type="clusterns")
    results = {
        "method": "clusterns",
        "objective": {"name": "sts_selection.best", "value": 0.81},
        "sts_selection": {"best": 0.81, "best_step": 250},
        "sts": {"spearman": {"STS12": 0.6, "STSB": 0.7}, "avg": 0.65},
    }
    log_results([logger], results)
    finish_wandb_run()
    (run_dir,) = list((tmp_path / "wandb").glob("offline-run-*"))
    info = offline_run(run_dir)
    assert info["job_type"] == "clusterns" and info["summary"]["objective"] == 0.81
    assert info["summary"]["sts/avg"] == 0.65 and info["summary"]["sts_selection/best"] == 0.81
    (table,) = list(run_dir.glob("files/media/table/sts_table_*.table.json"))
    assert json.loads(table.read_text())["data"] == [["STS12", 60.0], ["STSB", 70.0], ["avg", 65.0]]
