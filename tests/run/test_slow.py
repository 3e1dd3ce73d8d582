"""Slow tier (`make test-slow`): the real MiniLM backbone and DDP with 2 CPU processes."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.slow


def run_cli(args, tmp_path, timeout=900):
    env = dict(os.environ, PROJECT_ROOT=str(ROOT), TOKENIZERS_PARALLELISM="false")
    out = tmp_path / "run"
    result = subprocess.run([sys.executable, "run.py", *args, f"hydra.run.dir={out}", "~callbacks.progress"],
                            cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout)
    assert result.returncode == 0, result.stderr[-3000:]
    return out, json.loads((out / "results.json").read_text())


def test_sccl_minilm_on_demo_improves_or_keeps_clustering(tmp_path):
    out, results = run_cli(["trainer.max_steps=30", "dataset.callbacks.clustering_eval.every_n_steps=15"], tmp_path)
    before, final = results["clustering"]["before"], results["final"]
    # MiniLM already separates the demo topics; 30 steps must not destroy that
    assert before["kmeans_acc"] > 0.6 and final["kmeans_acc"] > 0.6
    assert (out / "predictions.csv").exists()


def test_sccl_stackoverflow_real_file(tmp_path, short_text_dir):
    out, results = run_cli(["dataset=stackoverflow", f"data_dir={short_text_dir}", "trainer.max_steps=5",
                            "dataset.callbacks.clustering_eval.every_n_steps=0"], tmp_path)
    assert results["steps"] == 5 and 0 < results["final"]["kmeans_acc"] <= 1
    assert sum(1 for _ in open(out / "predictions.csv")) == 20001


def test_ddp_two_cpu_processes(tmp_path, toy_corpus):
    out, results = run_cli(["trainer=ddp", "trainer.accelerator=cpu", "trainer.devices=2", "backbone=tiny",
                            "dataset=csv", f"data_dir={toy_corpus.parent}", f"dataset.file={toy_corpus.name}",
                            "dataset.text_column=text0", "dataset.aug_columns=[text1]",
                            "dataset.augmentation=explicit", "batch_size=6", "trainer.max_steps=4",
                            "dataset.callbacks.clustering_eval.every_n_steps=2"], tmp_path)
    assert results["steps"] == 4 and "kmeans_acc" in results["final"]
    assert (out / "checkpoints" / "last.ckpt").exists()


def test_multirun_writes_one_result_per_job(tmp_path):
    env = dict(os.environ, PROJECT_ROOT=str(ROOT), TOKENIZERS_PARALLELISM="false")
    sweep = tmp_path / "sweep"
    result = subprocess.run([sys.executable, "run.py", "--multirun", "backbone=tiny", "trainer.max_steps=2", "seed=0,1",
                             "~callbacks.progress", "print_table=false", f"hydra.sweep.dir={sweep}"],
                            cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
    assert result.returncode == 0, result.stderr[-3000:]
    seeds = sorted(json.loads(p.read_text())["seed"] for p in sweep.glob("*/results.json"))
    assert seeds == [0, 1]
