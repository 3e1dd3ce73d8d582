"""SCCL end to end on the tiny backbone: outputs, determinism, resume, ablations, no labels."""
import csv
import json

import pytest
import torch

from ctclust.training.train import train
from tests.helpers import compose_config, toy_overrides
from tests.helpers.data_files import write_csv
from tests.helpers.speed import CHUNKS


def run_toy(csv_path, out_dir, extra=(), steps=4):
    return train(compose_config(toy_overrides(csv_path, steps) + list(extra), out_dir))


def test_sccl_runs_and_writes_outputs(toy_corpus, tmp_path):
    out = tmp_path / "run"
    results = run_toy(toy_corpus, out)
    assert results["steps"] == 4
    saved = json.loads((out / "results.json").read_text())
    assert saved["best_selected_with_labels"] is True and saved["best_step"] in (2, 4)
    for key in ("kmeans_acc", "kmeans_nmi", "kmeans_ari", "kmeans_ami", "head_acc", "head_nmi"):
        assert 0.0 <= saved["final"][key] <= 1.0
    assert saved["clustering"]["before"]["step"] == 0
    with open(out / "predictions.csv") as handle:
        rows = list(csv.DictReader(handle))
    assert len(rows) == 36 and set(rows[0]) == {"row", "line", "text", "kmeans_cluster", "head_cluster", "label"}
    assert (out / "checkpoints" / "last.ckpt").exists() and (out / "config_resolved.yaml").exists()
    metrics = (out / "csv" / "metrics.csv").read_text()
    assert "train/loss" in metrics and "val/kmeans_acc" in metrics


def test_same_seed_same_metrics(toy_corpus, tmp_path):
    first = run_toy(toy_corpus, tmp_path / "a")
    second = run_toy(toy_corpus, tmp_path / "b")
    def scores(results):
        return [{k: v for k, v in h.items() if k != "eval_seconds"} for h in results["clustering"]["history"]]

    assert scores(first) == scores(second) and len(scores(first)) == 2
    a = torch.load(tmp_path / "a/checkpoints/last.ckpt", weights_only=False)["state_dict"]
    b = torch.load(tmp_path / "b/checkpoints/last.ckpt", weights_only=False)["state_dict"]
    assert all(torch.equal(a[k], b[k]) for k in a)


def test_resume_restores_centroids_and_evaluation_state(toy_corpus, tmp_path, monkeypatch):
    run_toy(toy_corpus, tmp_path / "part", steps=5)
    ckpt = tmp_path / "part/checkpoints/last.ckpt"
    saved = torch.load(ckpt, weights_only=False)
    assert bool(saved["state_dict"]["centroids_ready"])

    from lightning_modules.sccl.callbacks import centroid_init

    def fail(*args, **kwargs):
        raise AssertionError("centroids were re-initialised on resume")

    monkeypatch.setattr(centroid_init, "outputs_kmeans", fail)
    # the first training step of the resumed run must see the saved centroids
    seen = {}
    from lightning_modules.sccl.module import SCCL

    original_step = SCCL.training_step

    def spy(self, batch, batch_idx):
        seen.setdefault("centroids", self.centroids.detach().clone())
        return original_step(self, batch, batch_idx)

    monkeypatch.setattr(SCCL, "training_step", spy)
    resumed = run_toy(toy_corpus, tmp_path / "resumed", extra=[f"ckpt_path={ckpt}"], steps=8)
    assert torch.equal(seen["centroids"], saved["state_dict"]["centroids"])
    assert resumed["steps"] == 8
    part_history = saved["callbacks"]["ClusteringEvaluator"]["history"]
    assert resumed["clustering"]["history"][: len(part_history)] == part_history
    assert resumed["clustering"]["before"] == saved["callbacks"]["ClusteringEvaluator"]["before"]


@pytest.mark.parametrize(
    "objective,expected", [("instance", {"train/instance_loss"}), ("cluster", {"train/cluster_loss"})]
)
def test_ablation_objectives_log_only_their_loss(toy_corpus, tmp_path, objective, expected):
    out = tmp_path / objective
    run_toy(toy_corpus, out, extra=[f"method.objective={objective}"], steps=2)
    header = (out / "csv" / "metrics.csv").read_text().splitlines()[0].split(",")
    losses = {h for h in header if h.startswith("train/") and h.endswith("_loss")}
    assert losses == expected


def test_file_without_labels_trains_and_writes_predictions(tmp_path):
    rows = [[f"word{i % 5} thing {i}", f"word{i % 5} {i}"] for i in range(20)]
    path = write_csv(tmp_path / "nolabel.csv", ["text0", "text1"], rows)
    out = tmp_path / "run"
    results = run_toy(path, out, extra=["dataset.num_clusters=3"], steps=2)
    assert results["final"] is not None and "kmeans_acc" not in results["final"]
    assert results["best_selected_with_labels"] is False
    with open(out / "predictions.csv") as handle:
        assert "label" not in next(csv.reader(handle))


def test_backbone_trains_with_dropout_so_virtual_views_differ():
    from textcore.encoding.encoder import EncoderSettings, TextEncoder

    encoder = TextEncoder.from_name("minilm", EncoderSettings.outside_training())
    assert encoder.training and all(m.training for m in encoder.modules())
    tokens = encoder.tokenize(["the same text twice"] * 2)
    first, second = encoder(**tokens)
    assert not torch.allclose(first, second)  # dropout masks differ between the two copies


def test_progress_bar_shows_the_step_count(toy_corpus, tmp_path, monkeypatch):
    from callbacks.display import progress
    from callbacks.display.progress import StepProgressBar

    monkeypatch.setattr(progress, "stderr_is_terminal", lambda: True)  # pytest captures stderr: a terminal here

    bar_overrides = [o for o in toy_overrides(toy_corpus, 4) if o not in ("~callbacks.progress",
                                                                            "trainer.enable_progress_bar=false")]
    config = compose_config(bar_overrides, tmp_path / "run")
    assert config.callbacks.progress._target_ == "callbacks.display.progress.StepProgressBar"
    seen = []
    original = StepProgressBar.on_train_batch_end

    def spy(self, trainer, *args):
        original(self, trainer, *args)
        seen.append(str(self.progress.tasks[self.train_progress_bar_id].description))

    monkeypatch.setattr(StepProgressBar, "on_train_batch_end", spy)
    train(config)
    assert seen and seen[-1].strip().endswith("step 4/4")


def test_progress_bar_is_off_without_a_terminal(toy_corpus, tmp_path, monkeypatch):
    """Output to a file would only get the bar's last frame; the plain progress lines serve it instead."""
    from callbacks.display import progress

    monkeypatch.setattr(progress, "stderr_is_terminal", lambda: False)
    bar_overrides = [o for o in toy_overrides(toy_corpus, 2) if o not in ("~callbacks.progress",
                                                                            "trainer.enable_progress_bar=false")]
    states = []
    original = progress.StepProgressBar.on_train_start

    def spy(self, trainer, pl_module):
        original(self, trainer, pl_module)
        states.append(self.is_disabled)

    monkeypatch.setattr(progress.StepProgressBar, "on_train_start", spy)
    train(compose_config(bar_overrides, tmp_path / "run"))
    assert states == [True]


def test_sequential_variant_contrasts_first_then_clusters_from_fresh_centroids(toy_corpus, tmp_path):
    import pandas as pd

    out = tmp_path / "run"
    results = run_toy(toy_corpus, out, ["method.objective=sequential", "method.sequential_switch_step=2"], steps=4)
    assert results["steps"] == 4
    frame = pd.read_csv(out / "csv" / "metrics.csv")
    cluster = frame.dropna(subset=["train/cluster_loss"])["step"].tolist()
    assert cluster == [2, 3]  # clustering only from the switch on (the CSV's 0-based update index)
    # the clustering evaluation before the switch has no head (no centroids yet), after it has one
    history = results["clustering"]["history"]
    assert "head_acc" in history[-1] and "head_acc" not in results["clustering"]["before"]


def test_sequential_variant_switches_objective_at_the_step():
    from types import SimpleNamespace

    from lightning_modules.sccl.module import SCCL

    module = SCCL(num_clusters=2, backbone="tiny", chunk_tokens=CHUNKS, objective="sequential",
                  sequential_switch_step=3)
    seen = []
    for step in range(5):
        module._trainer = SimpleNamespace(global_step=step)
        seen.append((module.active_objective(), module.needs_centroid_init))
    assert seen == [("instance", False)] * 3 + [("cluster", True)] * 2
    module.set_centroids(module.centroids.detach() + 1)
    assert module.needs_centroid_init is False  # initialised once, kept (and saved for a resume)


def test_sequential_variant_needs_its_switch_step():
    from lightning_modules.sccl.module import SCCL
    from textcore.errors import ConfigError

    with pytest.raises(ConfigError, match="sequential_switch_step"):
        SCCL(num_clusters=2, backbone="tiny", chunk_tokens=CHUNKS, objective="sequential")
    with pytest.raises(ConfigError, match="objective=sequential only"):
        SCCL(num_clusters=2, backbone="tiny", chunk_tokens=CHUNKS, sequential_switch_step=5)
