"""Unsupervised SimCSE (docs/methods/clusterns.md baseline): InfoNCE with and without the hard-negative block,
dropout views, pooling, learning-rate schedule, the wiki dataset config and an end-to-end run."""
import json
import math
from types import SimpleNamespace

import pytest
import torch

from lightning_modules.simcse.losses import infonce_with_hard_negatives
from tests.helpers.speed import CHUNKS, LOADER


def cos(a, b) -> float:
    a, b = a.detach(), b.detach()
    return float(torch.dot(a, b) / (a.norm() * b.norm()))


def naive_infonce(z1, z2, tau, hard=None, mu=1.0) -> float:
    n = z1.shape[0]
    total = 0.0
    for i in range(n):
        denominator = 0.0
        for j in range(n):
            denominator += math.exp(cos(z1[i], z2[j]) / tau)
            if hard is not None:
                denominator += mu * math.exp(cos(z1[i], hard[j]) / tau)
        total += -math.log(math.exp(cos(z1[i], z2[i]) / tau) / denominator)
    return total / n


def problem(n=5, d=4, seed=0):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(n, d, generator=g, requires_grad=True), torch.randn(n, d, generator=g),
            torch.randn(n, d, generator=g))


def test_infonce_matches_loop_with_finite_gradients():
    z1, z2, _ = problem()
    loss = infonce_with_hard_negatives(z1, z2, 0.05)
    assert loss.item() == pytest.approx(naive_infonce(z1, z2, 0.05), rel=1e-5)
    loss.backward()
    assert torch.isfinite(z1.grad).all() and z1.grad.abs().sum() > 0


@pytest.mark.parametrize("mu", [1.0, 0.5, 3.0])
def test_hard_negative_block_matches_eq2(mu):
    z1, z2, hard = problem(seed=1)
    loss = infonce_with_hard_negatives(z1, z2, 0.05, hard, mu)
    assert loss.item() == pytest.approx(naive_infonce(z1, z2, 0.05, hard, mu), rel=1e-5)
    loss.backward()
    assert torch.isfinite(z1.grad).all()


def test_hard_negatives_raise_the_loss_and_weight_must_be_positive():
    z1, z2, _ = problem(seed=2)
    near = z1.detach() + 0.01  # hard negatives almost equal to the anchors
    assert infonce_with_hard_negatives(z1, z2, 0.05, near) > infonce_with_hard_negatives(z1, z2, 0.05)
    with pytest.raises(ValueError, match="hard_negatives=none"):
        infonce_with_hard_negatives(z1, z2, 0.05, near, 0.0)


def test_loss_ignores_embedding_norms():
    z1, _, _ = problem(seed=3)
    scaled = infonce_with_hard_negatives(3 * z1, z1, 0.05)
    assert scaled.item() == pytest.approx(infonce_with_hard_negatives(z1, z1, 0.05).item(), rel=1e-6)


# -------------------------------------------------------------------------------------- module


@pytest.fixture(scope="module")
def simcse():
    from lightning_modules.simcse.module import SimCSE

    return SimCSE(backbone="tiny", chunk_tokens=CHUNKS, lr=1e-3, lr_schedule="linear")


def test_text_tokens_reads_every_batch_kind():
    from lightning_modules.simcse.module import text_tokens

    ids = torch.ones(2, 3, dtype=torch.long)
    tok = {"input_ids": ids, "attention_mask": ids}
    assert text_tokens({**tok, "texts": ["a", "b"]}).keys() == {"input_ids", "attention_mask"}
    assert text_tokens({"original": tok, "view1": {"input_ids": 2 * ids}})["input_ids"] is ids
    assert text_tokens({"view1": tok, "view2": tok})["input_ids"] is ids
    with pytest.raises(KeyError, match="input_ids"):
        text_tokens({"labels": ids})


def test_dropout_makes_two_different_views(simcse):
    tokens = simcse.encoder.tokenize(["a short sentence", "another one here"])
    simcse.train()
    z1, z2 = simcse.two_views(dict(tokens))
    assert z1.shape == z2.shape == (2, simcse.encoder.dim)
    assert not torch.allclose(z1, z2)  # different dropout masks
    simcse.eval()
    e1, e2 = simcse.two_views(dict(tokens))
    assert torch.allclose(e1, e2, atol=1e-6)
    simcse.train()


def test_training_uses_mlp_and_evaluation_the_raw_cls_state(simcse):
    tokens = dict(simcse.encoder.tokenize(["one sentence"]))
    simcse.eval()
    with torch.no_grad():
        hidden = simcse.encoder.backbone(**tokens).last_hidden_state[:, 0]  # [1, d]
        assert torch.allclose(simcse.eval_step({"original": tokens})["embeddings"], hidden, atol=1e-6)
        assert torch.allclose(simcse.embed(tokens), simcse.encoder.mlp(hidden), atol=1e-6)  # training pooler
    simcse.train()


def test_linear_schedule_decays_to_zero(simcse):
    simcse._trainer = SimpleNamespace(estimated_stepping_batches=10)
    try:
        config = simcse.configure_optimizers()
    finally:
        simcse._trainer = None
    optimizer, scheduler = config["optimizer"], config["lr_scheduler"]["scheduler"]
    assert [g["lr"] for g in optimizer.param_groups] == [1e-3, 1e-3]  # head_lr_multiplier 1
    for _ in range(5):
        optimizer.step()
        scheduler.step()
    assert optimizer.param_groups[0]["lr"] == pytest.approx(5e-4)
    for _ in range(5):
        optimizer.step()
        scheduler.step()
    assert optimizer.param_groups[0]["lr"] == pytest.approx(0.0)


# -------------------------------------------------------------------------------------- configs, data


def test_wiki_dataset_config_builds_the_streaming_datamodule(tmp_path):
    from ctclust.training.builders import instantiate_datamodule, instantiate_method, resolve_speed_settings
    from tests.helpers import compose_config

    (tmp_path / "wiki_sample.txt").write_text("first sentence\n\nsecond sentence\n")
    cfg = compose_config(["method=clusterns", "dataset=wiki", f"data_dir={tmp_path}", "backbone=tiny"], tmp_path)
    assert cfg.dataset.name == "wiki" and cfg.dataset.num_clusters is None
    resolve_speed_settings(cfg)  # as the run does before building anything
    dm = instantiate_datamodule(cfg)
    dm.setup("fit")
    assert len(dm.dataset) == 2 and dm.batch_size == cfg.batch_size
    model = instantiate_method(cfg, dm)
    # K is a method hyper-parameter, not a property of the data; its default fits the default batch
    assert model.num_clusters == cfg.method.num_clusters <= cfg.batch_size
    assert model.eval_pooling == "cls_before_pooler" and model.hparams.lr == 5e-5


def test_method_configs_follow_the_papers(tmp_path):
    from tests.helpers import compose_config

    simcse = compose_config(["experiment=simcse_bert_base"], tmp_path)
    bert = compose_config(["experiment=clusterns_bert_base"], tmp_path)
    roberta = compose_config(["experiment=clusterns_roberta_base"], tmp_path)
    assert (simcse.batch_size, simcse.method.lr, simcse.method.temperature) == (64, 3e-5, 0.05)
    assert (bert.batch_size, bert.method.lr, bert.method.num_clusters, bert.method.momentum) == (256, 5e-5, 128, 1e-3)
    b, r = bert.method, roberta.method
    assert (b.kmean_cosine, b.bml_weight, b.bml_alpha, b.bml_beta) == (0.4, 1e-3, 0, 0.3)
    assert (roberta.batch_size, r.lr, r.num_clusters) == (512, 5e-5, 128)
    assert (r.bml_weight, r.bml_alpha, r.bml_beta) == (1e-4, 0.2, 0.5)
    for cfg in (simcse, bert, roberta):
        assert cfg.trainer.max_epochs == 1 and cfg.method.head_lr_multiplier == 1
        selection = cfg.method.callbacks.sts_selection
        # ClusterNS: --early_stop 3; SimCSE keeps the best evaluation but never stops early
        assert selection.every_n_steps == 125 and selection.patience == (0 if cfg is simcse else 3)
        assert cfg.method.pooling == "cls" and cfg.method.eval_pooling == "cls_before_pooler"
        assert cfg.trainer.precision == "16-mixed" and cfg.trainer.accelerator == "gpu"  # --fp16
    for cfg in (bert, roberta):  # the reference code's centroid update and BML reduction
        assert (cfg.method.centroid_update, cfg.method.bml_reduction) == ("sum", "matrix")


@pytest.mark.parametrize("row,batch,lr,extra", [
    ("simcse_roberta_base", 512, 1e-5, {}), ("simcse_bert_large", 64, 1e-5, {}),
    ("simcse_roberta_large", 512, 3e-5, {}),
    ("clusterns_bert_large", 512, 5e-5, {"kmean_cosine": 0.5, "bml_weight": 5e-5, "bml_alpha": 0.25}),
    ("clusterns_roberta_large", 512, 5e-5, {"momentum": 5e-4, "bml_weight": 0.0, "false_negatives": "none"}),
])
def test_new_paper_rows_compose_with_the_authors_settings(tmp_path, row, batch, lr, extra):
    from tests.helpers import compose_config

    cfg = compose_config([f"experiment={row}"], tmp_path)
    assert (cfg.batch_size, cfg.method.lr, cfg.max_length, cfg.trainer.max_epochs) == (batch, lr, 32, 1)
    assert all(cfg.method[key] == value for key, value in extra.items())
    assert cfg.backbone.name in ("roberta-base", "bert-large-uncased", "roberta-large")


def test_streaming_datamodule_rebuilds_its_shard_when_ddp_starts(tmp_path, monkeypatch):
    import datamodules.streaming_text as streaming

    path = tmp_path / "t.txt"
    path.write_text("".join(f"line {i}\n" for i in range(10)))
    dm = streaming.StreamingTextDataModule(path, tokenizer=object(), loader=LOADER)
    dm.setup("fit")  # run.py does this before the Trainer starts the process group
    assert (dm.dataset.rank, dm.dataset.world_size) == (0, 1)
    monkeypatch.setattr(streaming, "distributed_rank_world", lambda rank=None, world=None: (1, 2))
    dm.setup("fit")  # Lightning's call once DDP is up
    assert (dm.dataset.rank, dm.dataset.world_size) == (1, 2)
    assert sorted(dm.dataset.iter_shard()) == sorted(f"line {i}" for i in range(1, 10, 2))  # rank 1 of 2


def test_simcse_end_to_end_on_tiny(tmp_path):
    from ctclust.training.train import train
    from tests.helpers import compose_config, write_wiki_and_stsb

    wiki, _ = write_wiki_and_stsb(tmp_path)
    out = tmp_path / "run"
    overrides = [
        "method=simcse", "dataset=wiki", "backbone=tiny", f"data_dir={tmp_path}", f"dataset.path={wiki}",
        f"sts_data_dir={tmp_path / 'sts'}", "batch_size=8", "trainer.max_steps=3", "trainer.enable_progress_bar=false",
        "trainer.enable_model_summary=false", "~callbacks.progress", "print_table=false",
        "method.callbacks.sts_selection.every_n_steps=2", "trainer.log_every_n_steps=1",
    ]
    with pytest.warns(Warning, match="SICKR"):
        results = train(compose_config(overrides, out))
    saved = json.loads((out / "results.json").read_text())
    assert results["steps"] == 3 and [h["step"] for h in saved["sts_selection"]["history"]] == [2, 3]
    assert saved["sts"]["avg_over"] == ["STSB"] and saved["sts"]["pooling"] == "cls_before_pooler"
    header = (out / "csv" / "metrics.csv").read_text().splitlines()[0].split(",")
    assert {"train/loss", "train/sim_positive", "train/sim_in_batch_negative", "val/stsb_spearman"} <= set(header)
    assert (out / "sts.md").is_file() and (out / "sts.json").is_file()


@pytest.mark.parametrize("row", ["simcse_roberta_base", "simcse_bert_large", "simcse_roberta_large",
                                 "clusterns_bert_large", "clusterns_roberta_large"])
def test_new_paper_rows_run_a_few_steps_on_the_tiny_backbone(tmp_path, row):
    from ctclust.training.train import train
    from tests.helpers import compose_config, write_wiki_and_stsb

    wiki, _ = write_wiki_and_stsb(tmp_path)
    overrides = [
        f"experiment={row}", "backbone=tiny", "trainer=cpu", "trainer.precision=32-true", f"dataset.path={wiki}",
        f"sts_data_dir={tmp_path / 'sts'}", "batch_size=8", "trainer.max_steps=2", "trainer.enable_progress_bar=false",
        "~callbacks.progress", "print_table=false", "callbacks.report.plots=false",
        "method.callbacks.sts_selection.every_n_steps=1",
    ] + (["method.num_clusters=2"] if row.startswith("clusterns") else [])
    with pytest.warns(Warning, match="SICKR"):
        results = train(compose_config(overrides, tmp_path / "run"))
    assert results["steps"] == 2 and results["method"] == row.split("_")[0]
    assert [h["step"] for h in results["sts_selection"]["history"]] == [1, 2]
