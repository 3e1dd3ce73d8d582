"""The evaluation of a DDP run shared among its processes: each text embedded once, the numbers of one process."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.helpers import compose_config
from tests.helpers.data_files import ROOT
from tests.helpers.resume import without_timings
from tests.helpers.sweeps import cli_env

TINY = ["backbone=tiny", "batch_size=32", "trainer.enable_progress_bar=false", "~callbacks.progress",
        "~callbacks.model_summary", "dataset.eval_batch_size=64", "dataset.callbacks.clustering_eval.kmeans_n_init=2",
        "method.callbacks.centroid_init.n_init=2", "callbacks.report.plots=false", "callbacks.report.html=false",
        "print_table=false"]


@pytest.mark.slow
def test_the_final_evaluation_on_two_processes_embeds_each_text_once_and_equals_one_process(tmp_path):
    """The end-of-training evaluation of one checkpoint (eval_only), on one process and on two (DDP, gloo): the
    same metrics, and the two processes' encoder passes together embed each of the demo's 720 texts once."""
    from ctclust.training.train import train

    trained = tmp_path / "trained"
    train(compose_config(TINY + ["trainer.max_steps=2", "dataset.callbacks.clustering_eval.every_n_steps=0"],
                         trained))
    checkpoint = trained / "checkpoints" / "last.ckpt"
    finals, counts = {}, {}
    for processes, trainer in ((1, ["trainer=cpu"]),
                               (2, ["trainer=ddp", "trainer.accelerator=cpu", "trainer.devices=2",
                                    "trainer.precision=32-true", "trainer.deterministic=true"])):
        out, probe = tmp_path / f"eval{processes}", tmp_path / f"count{processes}"
        args = [*TINY, *trainer, f"ckpt_path={checkpoint}", "eval_only=true", f"hydra.run.dir={out}",
                "+callbacks.count._target_=tests.helpers.faults.CountEvalTexts", f"+callbacks.count.folder={probe}"]
        done = subprocess.run([sys.executable, "run.py", *args], cwd=ROOT, env=cli_env(OMP_NUM_THREADS="1"),
                              capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, done.stderr[-3000:]
        finals[processes] = without_timings(json.loads((out / "results.json").read_text())["final"])
        counts[processes] = sorted(json.loads(p.read_text())["texts"] for p in probe.glob("rank*.json"))
    assert counts[1] == [720] and sum(counts[2]) == 720 and min(counts[2]) >= 256  # 12 batches of 64 shared
    assert finals[2] == finals[1] and finals[1]["kmeans_acc"] > 0
