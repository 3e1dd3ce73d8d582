"""AECL: attention network, stage schedule, NS diagnostic, end-to-end stages and resume."""
import csv
import json
import math
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from ctclust.training.train import train
from lightning_modules.aecl.attention import SampleAttention
from lightning_modules.aecl.callbacks import stage_switch
from lightning_modules.aecl.callbacks.attention_ns import negative_similarity, off_class_attention
from lightning_modules.aecl.callbacks.stage_switch import AECLStageSwitch, stage_for_epoch
from tests.helpers import compose_config
from tests.helpers.aecl import aecl_toy_overrides
from tests.helpers.speed import CHUNKS, KMEANS


# -- attention network -------------------------------------------------------------------------------
def test_attention_rows_sum_to_one_and_h_is_s_times_t():
    torch.manual_seed(0)
    attention = SampleAttention(8)
    z = torch.randn(5, 8)
    h, s = attention(z)
    assert s.shape == (5, 5) and h.shape == (5, 8)
    assert torch.allclose(s.sum(dim=1), torch.ones(5))
    expected_s = torch.softmax(attention.key1(z) @ attention.key2(z).T / math.sqrt(8), dim=1)
    assert torch.allclose(s, expected_s, atol=1e-6)
    assert torch.allclose(h, s @ attention.value(z), atol=1e-6)


def test_attention_is_over_samples_permutation_equivariant():
    torch.manual_seed(1)
    attention = SampleAttention(4)
    z = torch.randn(6, 4)
    perm = torch.tensor([3, 0, 5, 1, 4, 2])
    h, s = attention(z)
    h_p, s_p = attention(z[perm])
    assert torch.allclose(h_p, h[perm], atol=1e-6) and torch.allclose(s_p, s[perm][:, perm], atol=1e-6)


# -- stage schedule ------------------------------------------------------------------------------------
def test_stage_for_epoch_switches_at_e1_and_e1_plus_e2():
    assert [stage_for_epoch(e, 2, 1) for e in range(5)] == [1, 1, 2, 3, 3]
    assert [stage_for_epoch(e, 0, 2) for e in range(3)] == [2, 2, 3]
    assert [stage_for_epoch(e, 1, 0) for e in range(3)] == [1, 3, 3]
    with pytest.raises(ValueError):
        stage_for_epoch(-1, 1, 1)
    # the reference code's 0-based loop keeps stage 1 while epoch <= E1: one epoch more
    assert [stage_for_epoch(e, 2, 1, "reference") for e in range(5)] == [1, 1, 1, 2, 3]


@pytest.mark.parametrize("kwargs", [{"e1": -1}, {"e2": 1.5}, {"kmeans_n_init": 0}, {"schedule": "code"},
                                    {"pseudo_labels": "twice"}, {"kmeans_tol": 0.01, "kmeans_backend": "fast"}])
def test_stage_switch_validates_arguments(kwargs):
    with pytest.raises(ValueError):
        AECLStageSwitch(**{"kmeans_backend": KMEANS, "kmeans_sample": 0, **kwargs})


class _FakeAECL:
    num_clusters = 2
    e1, e2 = 1, 2

    def __init__(self):
        self.stage, self.pseudo_label_epoch, self.labels = 1, torch.tensor(-1), None

    def set_stage(self, stage):
        self.stage = stage

    def set_pseudo_labels(self, labels, epoch):
        self.labels, self.pseudo_label_epoch = labels, torch.tensor(epoch)

    def eval_step(self, batch):  # pragma: no cover - the test replaces the evaluation pass
        raise AssertionError


def test_stage_switch_recomputes_kmeans_labels_at_each_stage_two_epoch(monkeypatch):
    calls = []
    points = torch.tensor([[0.0, 0.0], [0.1, 0.0], [5.0, 5.0], [5.1, 5.0]])

    def fake_outputs(trainer, module):
        calls.append(trainer.current_epoch)
        return {"embeddings": points}

    monkeypatch.setattr(stage_switch, "cached_eval_outputs", fake_outputs)
    module = _FakeAECL()
    callback = AECLStageSwitch(kmeans_seed=0, kmeans_n_init=2, kmeans_backend=KMEANS, kmeans_sample=0)
    strategy = SimpleNamespace(broadcast=lambda x, src=0: x)
    callback.setup(None, module, "fit")
    assert (callback.e1, callback.e2) == (1, 2)  # taken from the module
    stages = []
    for epoch in range(5):
        callback.on_train_epoch_start(SimpleNamespace(current_epoch=epoch, strategy=strategy), module)
        stages.append(module.stage)
    assert stages == [1, 2, 2, 3, 3] and calls == [1, 2]
    labels = module.labels.tolist()
    assert labels[0] == labels[1] != labels[2] == labels[3] and int(module.pseudo_label_epoch) == 2
    # a resumed stage-2 epoch whose labels exist is not recomputed
    module.pseudo_label_epoch = torch.tensor(2)
    callback.on_train_epoch_start(SimpleNamespace(current_epoch=2, strategy=strategy), module)
    assert calls == [1, 2]


def test_reference_schedule_computes_the_pseudo_labels_once_and_keeps_them(monkeypatch):
    calls, fits = [], []
    points = torch.tensor([[0.0, 0.0], [0.1, 0.0], [5.0, 5.0], [5.1, 5.0]])

    def fake_outputs(trainer, module):
        calls.append(trainer.current_epoch)
        return {"embeddings": points}

    real_fit = stage_switch.kmeans_fit

    def recording_fit(*args, **kwargs):
        fits.append((args[3], args[4], kwargs))
        return real_fit(*args, **kwargs)

    monkeypatch.setattr(stage_switch, "cached_eval_outputs", fake_outputs)
    monkeypatch.setattr(stage_switch, "kmeans_fit", recording_fit)
    module = _FakeAECL()  # e1 = 1, e2 = 2
    callback = AECLStageSwitch(kmeans_seed=0, kmeans_n_init=1, kmeans_backend="sklearn", kmeans_sample=0,
                               schedule="reference",
                               pseudo_labels="once", kmeans_max_iter=3000, kmeans_tol=0.01)
    strategy = SimpleNamespace(broadcast=lambda x, src=0: x)
    callback.setup(None, module, "fit")
    stages = []
    for epoch in range(6):
        callback.on_train_epoch_start(SimpleNamespace(current_epoch=epoch, strategy=strategy), module)
        stages.append(module.stage)
    assert stages == [1, 1, 2, 2, 3, 3] and calls == [2]  # stage 1 = e1 + 1 epochs; one KMeans, kept
    assert fits == [(1, "sklearn", {"max_iter": 3000, "tol": 0.01, "sample": 0})]
    assert int(module.pseudo_label_epoch) == 2


def test_stage_switch_rejects_other_modules():
    with pytest.raises(TypeError, match="set_stage"):
        AECLStageSwitch(e1=1, e2=1, kmeans_backend=KMEANS, kmeans_sample=0).setup(None, torch.nn.Linear(1, 1), "fit")


# -- the module's objective per stage ---------------------------------------------------------------------
@pytest.fixture(scope="module")
def tiny_aecl():
    from lightning_modules.aecl.module import AECL

    torch.manual_seed(0)
    module = AECL(num_clusters=3, backbone="tiny", chunk_tokens=CHUNKS, lambda1=2.0, lambda2=3.0, lambda3=0.5,
                  lambda4=7.0)
    texts = ["pasta sauce bake", "planet orbit star", "python bug loop", "bread oven soup", "comet rocket moon"]
    tokens = module.encoder.tokenize(texts)
    reversed_tokens = module.encoder.tokenize([t[::-1] for t in texts])
    return module, {"index": torch.arange(5), "view1": tokens, "view2": reversed_tokens}


def logged_step(module, batch):
    logged = {}
    module.log = lambda name, value, **kwargs: logged.__setitem__(name, float(value))
    total = module.training_step(batch, 0)
    return float(total), logged


@pytest.mark.parametrize("reference", [False, True])
def test_training_objective_per_stage(tiny_aecl, reference):
    module, batch = tiny_aecl
    module.reference = reference
    module.set_stage(1)
    total, logged = logged_step(module, batch)
    assert total == pytest.approx(2.0 * logged["train/instance_loss"], rel=1e-5) and "train/pseudo_loss" not in logged
    module.set_pseudo_labels(torch.tensor([0, 1, 2, -1, 1, 0, 0]), epoch=1)  # a larger training set than the batch
    module.set_stage(2)
    total, logged = logged_step(module, batch)
    assert logged["train/pseudo_label_share"] == pytest.approx(0.8)
    assert total == pytest.approx(2.0 * logged["train/instance_loss"] + 3.0 * logged["train/pseudo_loss"], rel=1e-5)
    module.set_stage(3)
    module.confidence_threshold = 0.0  # every sample gets its own argmax as pseudo-label
    total, logged = logged_step(module, batch)
    expected = (logged["train/cluster_loss"] + 2.0 * logged["train/instance_loss"] + 3.0 * logged["train/pseudo_loss"]
                + 0.5 * logged["train/row_entropy_term"] + 7.0 * logged["train/marginal_entropy_term"])
    assert logged["train/pseudo_label_share"] == 1.0 and total == pytest.approx(expected, rel=1e-5)
    assert logged["train/row_entropy_term"] < 0 and (logged["train/marginal_entropy_term"] >= 0) == reference
    module.confidence_threshold = 0.95


def test_stage_three_threshold_is_strict_for_the_paper_and_inclusive_for_the_reference(tiny_aecl):
    module, _ = tiny_aecl
    p0 = torch.tensor([[0.5, 0.25, 0.25], [0.25, 0.5, 0.25], [0.2, 0.2, 0.6], [0.4, 0.3, 0.3]])
    saved = module.reference, module.confidence_threshold
    module.confidence_threshold = 0.5  # exactly representable: rows 0 and 1 sit on the threshold
    try:
        module.reference = False  # paper: max p⁰ > threshold
        assert module._confident_targets(p0).tolist() == [-1, -1, 2, -1]
        module.reference = True  # reference code: max p⁰ >= threshold
        assert module._confident_targets(p0).tolist() == [0, 1, 2, -1]
    finally:
        module.reference, module.confidence_threshold = saved


@pytest.mark.parametrize(
    "reference,instance_loss,form",
    [(False, None, "paper"), (True, None, "reference"), (True, "rowwise", "rowwise"),
     (False, "reference", "reference")],
)
def test_instance_loss_form_follows_reference_unless_named(reference, instance_loss, form):
    from lightning_modules.aecl.losses import similarity_guided_loss
    from lightning_modules.aecl.module import AECL

    torch.manual_seed(0)
    module = AECL(num_clusters=3, backbone="tiny", chunk_tokens=CHUNKS, reference=reference,
                  instance_loss=instance_loss, lambda1=1.0)
    assert module.instance_loss_form == form
    module.eval()  # no dropout: the step and the check below see the same outputs
    tokens = module.encoder.tokenize(["pasta sauce bake", "planet orbit star", "python bug loop", "bread oven"])
    other = module.encoder.tokenize(["bake sauce", "star orbit", "loop bug", "oven bread soup"])
    _, logged = logged_step(module, {"index": torch.arange(4), "view1": tokens, "view2": other})
    with torch.no_grad():
        out0, out1 = module.forward_view(tokens), module.forward_view(other)
        clusters = out0["logits"].argmax(dim=1)
        expected = similarity_guided_loss(out0["z"], out1["z"], out0["h"], out1["h"], out0["s"], out1["s"], clusters,
                                          module.tau_instance, form=form)
    assert logged["train/instance_loss"] == pytest.approx(expected.item(), rel=1e-5)
    assert 0.0 <= logged["train/confident_share"] <= 1.0 and 1 / 3 <= logged["train/confidence_mean"] <= 1.0


def test_unknown_instance_loss_form_is_a_clear_error():
    from lightning_modules.aecl.module import AECL

    with pytest.raises(ValueError, match="instance_loss"):
        AECL(num_clusters=3, backbone="tiny", chunk_tokens=CHUNKS, instance_loss="code")


def test_stage_two_without_pseudo_labels_says_which_callback_is_missing():
    from lightning_modules.aecl.module import AECL

    module = AECL(num_clusters=3, backbone="tiny", chunk_tokens=CHUNKS)
    tokens = module.encoder.tokenize(["a b", "c d", "e f"])
    module.set_stage(2)
    module.log = lambda *args, **kwargs: None
    with pytest.raises(RuntimeError, match="AECLStageSwitch"):
        module.training_step({"index": torch.arange(3), "view1": tokens, "view2": tokens}, 0)
    with pytest.raises(ValueError, match="stage"):
        module.set_stage(4)


def test_pseudo_labels_load_into_a_fresh_module():
    from lightning_modules.aecl.module import AECL

    module = AECL(num_clusters=3, backbone="tiny", chunk_tokens=CHUNKS)
    module.set_stage(3)
    module.set_pseudo_labels(torch.tensor([2, 0, -1, 1]), epoch=4)
    fresh = AECL(num_clusters=3, backbone="tiny", chunk_tokens=CHUNKS)
    fresh.load_state_dict(module.state_dict())
    assert fresh.stage == 3 and fresh.pseudo_labels.tolist() == [2, 0, -1, 1] and int(fresh.pseudo_label_epoch) == 4


# -- configs ------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "dataset,e1,e2,lambda4",
    [("searchsnippets", 10, 1, 0.18), ("stackoverflow", 2, 1, 10.0), ("googlenews_t", 10, 6, 0.09),
     ("tweet", 20, 10, 0.09)],
)
def test_aecl_experiments_carry_the_paper_settings(tmp_path, dataset, e1, e2, lambda4):
    cfg = compose_config([f"experiment=aecl_{dataset}"], tmp_path)
    assert (cfg.method.e1, cfg.method.e2, cfg.method.lambda4) == (e1, e2, lambda4)
    m = cfg.method
    # the authors' train.py: temperatures 0.5 / 1.0, its loss forms, stage 1 = E1 + 1 epochs, one KMeans
    assert (m.tau_instance, m.tau_cluster, m.lambda1, m.lambda2, m.lambda3) == (0.5, 1.0, 10.0, 5.0, 0.01)
    assert m.reference is True and m.head_lr_multiplier * m.lr == pytest.approx(5e-4)
    switch = m.callbacks.stage_switch
    assert (switch.schedule, switch.pseudo_labels, switch.kmeans_n_init, switch.kmeans_max_iter, switch.kmeans_tol,
            switch.kmeans_backend, switch.kmeans_seed) == ("reference", "once", 1, 3000, 0.01, "sklearn", 0)
    assert cfg.batch_size == 400 and cfg.max_length == 32 and cfg.seed == 0
    assert cfg.trainer.max_epochs == 70 and cfg.trainer.max_steps == -1 and cfg.trainer.precision == "32-true"
    assert cfg.backbone.name.endswith("distilbert-base-nli-stsb-mean-tokens") and cfg.method.lr == 5e-6
    # the head is evaluated on one random permutation in batches of 400, once per epoch
    dataset_cfg = cfg.dataset
    order = (dataset_cfg.eval_batch_size, dataset_cfg.eval_sort_by_length, dataset_cfg.eval_shuffle_seed)
    assert order == (400, False, 0)
    sizes = {"searchsnippets": 12340, "stackoverflow": 20000, "googlenews_t": 11109, "tweet": 2472}
    assert cfg.dataset.callbacks.clustering_eval.every_n_steps == -(-sizes[dataset] // 400)


# -- NS diagnostic ---------------------------------------------------------------------------------------
def test_off_class_attention_hand_value():
    s = torch.tensor([[0.5, 0.3, 0.2], [0.1, 0.1, 0.8], [0.0, 0.6, 0.4]])
    labels = torch.tensor([0, 0, 1])
    assert torch.allclose(off_class_attention(s, labels), torch.tensor([0.2, 0.8, 0.6]))


def test_negative_similarity_over_batches():
    labels = np.array(["a", "b", "a", "b", "a"])
    projections = torch.arange(5.0).unsqueeze(1)

    def uniform(z):
        n = z.shape[0]
        return z, torch.full((n, n), 1.0 / n)

    # batches [0, 1] and [2, 3, 4]: rows put 1/2, 1/2 | 1/3, 2/3, 1/3 on the other class
    expected = (0.5 + 0.5 + 1 / 3 + 2 / 3 + 1 / 3) / 5
    assert negative_similarity(projections, labels, [[0, 1], [2, 3, 4]], uniform) == pytest.approx(expected)

    def same_class_only(z):  # attention only to the sample itself: NS = 0
        return z, torch.eye(z.shape[0])

    assert negative_similarity(projections, labels, [[0, 1, 2, 3, 4]], same_class_only) == 0.0


# -- end to end ----------------------------------------------------------------------------------------------
def run_aecl(csv_path, out_dir, extra=(), **kwargs):
    return train(compose_config(aecl_toy_overrides(csv_path, **kwargs) + list(extra), out_dir))


def read_metrics(path):
    with open(path) as handle:
        return list(csv.DictReader(handle))


def test_aecl_trains_through_three_stages_and_writes_outputs(toy_corpus, tmp_path):
    out = tmp_path / "run"
    results = run_aecl(toy_corpus, out, e1=1, e2=1, epochs=3)
    assert results["steps"] == 9  # 36 texts, batch 12: 3 steps per epoch
    saved = json.loads((out / "results.json").read_text())
    for key in ("kmeans_acc", "kmeans_nmi", "head_acc", "head_nmi"):
        assert 0.0 <= saved["final"][key] <= 1.0
    assert 0.0 <= saved["attention"]["final"]["ns"] <= 1.0 and saved["attention"]["before"]["step"] == 0
    with open(out / "predictions.csv") as handle:
        rows = list(csv.DictReader(handle))
    assert len(rows) == 36 and "head_cluster" in rows[0]
    metrics = read_metrics(out / "csv" / "metrics.csv")
    stage_by_step = {int(r["step"]): float(r["train/stage"]) for r in metrics if r.get("train/stage")}
    # steps are 0-based in the logger: epoch 0 = steps 0-2, epoch 1 = 3-5, epoch 2 = 6-8
    assert stage_by_step == {0: 1, 1: 1, 2: 1, 3: 2, 4: 2, 5: 2, 6: 3, 7: 3, 8: 3}
    logged = {k for r in metrics for k, v in r.items() if v}
    expected = {"train/instance_loss", "train/pseudo_loss", "train/cluster_loss", "train/marginal_entropy_term",
                "val/ns"}
    assert expected <= logged
    assert not any(r.get("train/cluster_loss") for r in metrics if int(r["step"]) < 6)  # L_C only in stage 3
    state = torch.load(out / "checkpoints" / "last.ckpt", weights_only=False)["state_dict"]
    assert int(state["training_stage"]) == 3 and state["pseudo_labels"].shape == (36,)


def test_resume_in_stage_two_keeps_stage_and_pseudo_labels(toy_corpus, tmp_path, monkeypatch):
    # a checkpoint in the middle of epoch 1 (stage 2, after its KMeans labels were computed)
    mid = tmp_path / "mid"
    extra = ["+callbacks.mid._target_=lightning.pytorch.callbacks.ModelCheckpoint", f"+callbacks.mid.dirpath={mid}",
             "+callbacks.mid.filename=mid", "+callbacks.mid.every_n_train_steps=4", "+callbacks.mid.save_top_k=-1"]
    run_aecl(toy_corpus, tmp_path / "part", extra=extra, e1=1, e2=2, epochs=3, steps=5)
    ckpt = mid / "mid.ckpt"
    state = torch.load(ckpt, weights_only=False)["state_dict"]
    assert int(state["training_stage"]) == 2 and int(state["pseudo_label_epoch"]) == 1
    assert state["pseudo_labels"].shape == (36,) and (state["pseudo_labels"] >= 0).all()

    computed_for = []
    original = AECLStageSwitch.kmeans_labels

    def spy_kmeans(self, trainer, module):
        computed_for.append(trainer.current_epoch)
        return original(self, trainer, module)

    monkeypatch.setattr(AECLStageSwitch, "kmeans_labels", spy_kmeans)
    from lightning_modules.aecl.module import AECL

    seen = []
    original_step = AECL.training_step

    def spy_step(self, batch, batch_idx):
        seen.append((self.trainer.global_step, self.trainer.current_epoch, self.stage, self.pseudo_labels.clone()))
        return original_step(self, batch, batch_idx)

    monkeypatch.setattr(AECL, "training_step", spy_step)
    resumed = run_aecl(toy_corpus, tmp_path / "resumed", extra=[f"ckpt_path={ckpt}"], e1=1, e2=2, epochs=3)
    step, epoch, stage, labels = seen[0]
    assert (step, epoch, stage) == (4, 1, 2) and torch.equal(labels, state["pseudo_labels"])
    assert computed_for == [2]  # not again for the resumed epoch 1; anew for stage-2 epoch 2
    assert [s[2] for s in seen] == [2] * 5 and resumed["steps"] == 9
