"""The CPU trainer's default budget on a small corpus: 2 epochs end training before max_steps (conf/trainer/cpu.yaml),
and the evaluations, the budget line and results.json follow the epochs' end, not max_steps."""
from __future__ import annotations

import logging

from tests.helpers import compose_config
from tests.helpers.data_files import write_short_text_csv


def test_two_epochs_of_a_small_corpus_end_the_default_run_and_its_last_step_is_evaluated_once(tmp_path, caplog):
    from ctclust.training.train import train

    write_short_text_csv(tmp_path / "texts.csv", header=("label", "text", "aug"))  # 40 texts in 4 topics
    cfg = compose_config(["backbone=tiny", "dataset=csv", f"data_dir={tmp_path}", "dataset.file=texts.csv",
                          "batch_size=8", "dataset.callbacks.clustering_eval.every_n_steps=5",
                          "trainer.enable_progress_bar=false", "~callbacks.progress", "print_table=false",
                          "callbacks.report.plots=false", "method.callbacks.centroid_init.n_init=2",
                          "dataset.callbacks.clustering_eval.kmeans_n_init=2", "cluster_space=embeddings"],
                         tmp_path / "run")
    assert cfg.trainer.max_steps == 150 and cfg.trainer.max_epochs == 2  # the defaults, untouched
    with caplog.at_level(logging.INFO, logger="validation.data"):
        results = train(cfg)
    assert results["steps"] == 10  # 40 texts / 8 = 5 steps an epoch, 2 epochs
    steps = [entry["step"] for entry in results["clustering"]["history"]]
    assert steps == [5, 10], steps  # every 5 steps; step 10, the last, once
    assert results["clustering"]["final"]["step"] == 10
    budget = [r.getMessage() for r in caplog.records if r.getMessage().startswith("training budget")]
    assert budget == ["training budget: 10 steps x 8 texts = 80 texts drawn, 2.00 epochs of the 40 texts "
                      "(trainer.max_epochs=2 ends it before trainer.max_steps=150; trainer.max_epochs=-1 trains "
                      "every step)"], budget
