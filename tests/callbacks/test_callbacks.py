"""The callbacks' pure functions and state, without a Trainer."""
import numpy as np
import torch

from callbacks.evaluation.clustering_eval import ClusteringEvaluator, evaluate_outputs
from lightning_modules.shared.eval_outputs import EvalOutputs, collect_eval_outputs, outputs_kmeans
from tests.helpers.speed import KMEANS


def blobs(seed=0):
    rng = np.random.default_rng(seed)
    centres = np.array([[5.0, 0.0], [-5.0, 0.0], [0.0, 5.0]])
    x = np.concatenate([c + 0.1 * rng.normal(size=(10, 2)) for c in centres])
    return torch.tensor(x, dtype=torch.float32), np.repeat([0, 1, 2], 10), centres


def test_one_kmeans_per_setting_of_a_pass_finds_the_centres(monkeypatch):
    """SCCL's centroids and the evaluation before training ask for the same KMeans of one pass: it is fitted once."""
    import textcore.kmeans as kmeans

    x, _, centres = blobs()
    outputs = EvalOutputs({"embeddings": x})
    fits = []
    fit = kmeans.kmeans_fit
    monkeypatch.setattr(kmeans, "kmeans_fit", lambda *a, **k: fits.append(k) or fit(*a, **k))
    found = outputs_kmeans(outputs, 3, 0, 10, KMEANS, 0)
    assert outputs_kmeans(outputs, 3, 0, 10, KMEANS, 0) is found and len(fits) == 1
    assert outputs_kmeans(outputs, 3, 1, 10, KMEANS, 0) is not found and len(fits) == 2  # another seed
    # every true centre has a found centre within 0.2
    dist = torch.cdist(torch.tensor(centres, dtype=torch.float32), torch.as_tensor(found.cluster_centers_))
    assert (dist.min(dim=1).values < 0.2).all()


def test_evaluate_outputs_scores_kmeans_and_head():
    x, y, _ = blobs()
    head = torch.tensor((y + 1) % 3)  # a permutation of the truth
    metrics, predictions = evaluate_outputs({"embeddings": x, "head_pred": head}, y, 3, kmeans_backend=KMEANS)
    assert metrics["kmeans_acc"] == 1.0 and metrics["head_acc"] == 1.0
    assert set(predictions) == {"kmeans", "head"} and len(predictions["kmeans"]) == 30


def test_evaluate_outputs_without_labels_gives_predictions_only():
    x, _, _ = blobs()
    metrics, predictions = evaluate_outputs({"embeddings": x}, None, 3, kmeans_backend=KMEANS)
    assert not any(k.endswith(("_acc", "_nmi", "_ari", "_ami")) for k in metrics)
    assert metrics["kmeans_silhouette"] > 0.5 and "kmeans_changed" not in metrics  # no earlier evaluation
    assert len(set(predictions["kmeans"])) == 3
    metrics, _ = evaluate_outputs({"embeddings": x}, None, 3, label_free_sample=None, kmeans_backend=KMEANS)
    assert metrics == {}


def test_evaluator_best_step_and_state_round_trip():
    ev = ClusteringEvaluator(every_n_steps=5, kmeans_backend=KMEANS, kmeans_sample=0, sample=0)
    ev.before = {"step": 0, "kmeans_acc": 0.2}
    ev.history = [{"step": 5, "kmeans_acc": 0.5}, {"step": 10, "kmeans_acc": 0.7}, {"step": 15, "kmeans_acc": 0.6}]
    assert ev.best()["step"] == 10
    summary = ev.summary()
    assert summary["best_step"] == 10 and summary["best_selected_with_labels"] is True
    restored = ClusteringEvaluator(kmeans_backend=KMEANS, kmeans_sample=0, sample=0)
    restored.load_state_dict(ev.state_dict())
    assert restored.before == ev.before and restored.history == ev.history


def test_evaluator_without_labels_has_no_best():
    ev = ClusteringEvaluator(kmeans_backend=KMEANS, kmeans_sample=0, sample=0)
    ev.history = [{"step": 5}]
    assert ev.summary()["best"] is None and ev.summary()["best_selected_with_labels"] is False


def test_evaluator_rejects_negative_interval():
    import pytest

    with pytest.raises(ValueError, match="every_n_steps"):
        ClusteringEvaluator(every_n_steps=-1, kmeans_backend=KMEANS, kmeans_sample=0, sample=0)


class _Echo(torch.nn.Module):
    device = torch.device("cpu")

    def eval_step(self, batch):
        return {"embeddings": batch["value"].unsqueeze(1)}


def test_collect_eval_outputs_restores_row_order():
    batches = [{"index": torch.tensor([2, 0]), "value": torch.tensor([20.0, 0.0])},
               {"index": torch.tensor([1]), "value": torch.tensor([10.0])}]
    module = _Echo().train()
    out = collect_eval_outputs(module, batches)
    assert out["embeddings"].squeeze(1).tolist() == [0.0, 10.0, 20.0]
    assert module.training  # mode restored


def test_progress_description_shows_step_budget_not_negative_epochs():
    from callbacks.display.progress import train_description

    # the paper recipes train by max_steps with max_epochs=-1; Lightning's own bar printed "Epoch 12/-2"
    assert train_description(12, -1, 70, 150) == "Epoch 12 · step 70/150"
    # the CPU default on a small corpus: 2 epochs end it at step 24 (the budget given), before max_steps=150
    assert train_description(1, 2, 20, 24) == "Epoch 1/1 · step 20/24"
    assert train_description(3, 10, 5, -1) == "Epoch 3/9"
    assert train_description(0, None, 0, -1) == "Epoch 0"
