"""One evaluation pass: outputs written in place by position, memory-mapped when they would not fit comfortably."""
from __future__ import annotations

import numpy as np
import torch

import lightning_modules.shared.eval_outputs as eval_outputs


class _Echo(torch.nn.Module):
    device = torch.device("cpu")

    def eval_step(self, batch):
        return {"embeddings": batch["value"].float().unsqueeze(1).repeat(1, 3), "head_pred": batch["value"] % 2}


def batches():
    order = [[5, 0, 3], [1, 4], [2]]  # positions in the order a length-sorted loader runs them
    return [{"index": torch.tensor(b), "value": torch.tensor(b) * 10} for b in order]


def test_a_large_output_goes_to_a_mapped_file_with_the_same_values_and_leaves_no_file(tmp_path, monkeypatch,
                                                                                       caplog):
    in_memory = eval_outputs.collect_eval_outputs(_Echo(), batches())
    assert type(eval_outputs._allocate((6, 3), tmp_path)) is np.ndarray
    monkeypatch.setattr(eval_outputs, "available_memory", lambda: 100)  # 72 bytes > a quarter of 100
    assert type(eval_outputs._allocate((6, 3), tmp_path)) is np.memmap
    with caplog.at_level("INFO", logger=eval_outputs.log.name):
        mapped = eval_outputs.collect_eval_outputs(_Echo(), batches(), spill_dir=tmp_path / "embeddings")
    assert "kept in a memory-mapped file in" in caplog.text
    for key in ("embeddings", "head_pred"):
        assert torch.equal(mapped[key], in_memory[key])
    assert mapped["embeddings"][:, 0].tolist() == [0.0, 10.0, 20.0, 30.0, 40.0, 50.0]  # by position
    assert list((tmp_path / "embeddings").iterdir()) == []  # unlinked at once: nothing left behind


def test_without_a_memory_figure_the_outputs_stay_in_memory(monkeypatch):
    monkeypatch.setattr(eval_outputs, "available_memory", lambda: None)
    out = eval_outputs.collect_eval_outputs(_Echo(), batches())
    assert out["head_pred"].tolist() == [0.0, 0.0, 0.0, 0.0, 0.0, 0.0] and out["embeddings"].shape == (6, 3)


def test_the_pass_of_a_run_is_mapped_into_the_folder_its_evaluator_names(tmp_path, monkeypatch, caplog):
    """The clustering evaluator sets <run>/embeddings at set-up; the cached pass maps its outputs there, not into the
    system's temporary folder."""
    from types import SimpleNamespace

    from callbacks.evaluation.clustering_eval import ClusteringEvaluator
    from tests.helpers.speed import KMEANS

    module = _Echo()
    ClusteringEvaluator(output_dir=str(tmp_path / "run"), kmeans_backend=KMEANS, kmeans_sample=0,
                        sample=0).setup(None, module, "fit")
    trainer = SimpleNamespace(global_step=3, datamodule=SimpleNamespace(eval_dataloader=batches))
    monkeypatch.setattr(eval_outputs, "available_memory", lambda: 100)
    with caplog.at_level("INFO", logger=eval_outputs.log.name):
        out = eval_outputs.cached_eval_outputs(trainer, module)
    assert f"kept in a memory-mapped file in {tmp_path / 'run' / 'embeddings'}" in caplog.text
    assert out["embeddings"][:, 0].tolist() == [0.0, 10.0, 20.0, 30.0, 40.0, 50.0]
