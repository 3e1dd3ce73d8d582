"""PairSupCon (docs/methods/pairsupcon.md): losses against naive loops, the module's modes, DDP, and a smoke run."""

import json
import math

import pytest
import torch
import torch.distributed as dist

from lightning_modules.pairsupcon.losses import (
    WEIGHTINGS,
    instance_discrimination_loss,
    pair_classification_loss,
    pair_features,
    pairsupcon_objective,
)
from tests.helpers.data_files import write_csv
from tests.helpers.ddp import spawn_gloo
from tests.helpers.speed import CHUNKS, KMEANS
from textcore.errors import ConfigError


# -------------------------------------------------------------------------------- naive references
def naive_instance_loss(z1, z2, entailment, tau, weighting):
    """Anchor by anchor, with Python sums, straight from the formulas of paper eqs (1)-(3)."""
    m = len(z1)
    z = torch.cat([z1, z2]).double()
    z = z / z.norm(dim=1, keepdim=True)
    total, anchors = 0.0, 0
    for a in range(2 * m):
        if not entailment[a % m]:
            continue
        p = (a + m) % (2 * m)
        s_pos = float(z[a] @ z[p])
        s_neg = [float(z[a] @ z[j]) for j in range(2 * m) if j not in (a, p)]
        mean_exp = sum(math.exp(s / tau) for s in s_neg) / len(s_neg)
        weights = [math.exp(s / tau) / mean_exp for s in s_neg]
        if weighting == "orig":
            negatives = sum(math.exp(s / tau) for s in s_neg)
            loss = -math.log(math.exp(s_pos / tau) / (math.exp(s_pos / tau) + negatives))
        elif weighting == "hardneg":
            negatives = sum(w * math.exp(s / tau) for w, s in zip(weights, s_neg))
            loss = -math.log(math.exp(s_pos / tau) / (math.exp(s_pos / tau) + negatives))
        else:  # paper eq (3): weight inside the exponent
            loss = math.log(1 + sum(math.exp((w * s - s_pos) / tau) for w, s in zip(weights, s_neg)))
        total += loss
        anchors += 1
    return total / anchors


def random_problem(m=5, d=7, seed=0):
    g = torch.Generator().manual_seed(seed)
    z1, z2 = torch.randn(m, d, generator=g), torch.randn(m, d, generator=g)
    entailment = torch.tensor([True, False, True, True, False][:m])
    return z1, z2, entailment


@pytest.mark.parametrize("weighting", WEIGHTINGS)
@pytest.mark.parametrize("tau", [0.5, 0.05])
def test_instance_loss_matches_naive_loop(weighting, tau):
    z1, z2, entailment = random_problem()
    got = instance_discrimination_loss(z1.double(), z2.double(), entailment, tau, weighting)
    assert got.item() == pytest.approx(naive_instance_loss(z1, z2, entailment, tau, weighting), rel=1e-9)


def test_weightings_differ_and_coincide_when_negatives_are_equally_hard():
    z1, z2, entailment = random_problem()
    values = {w: instance_discrimination_loss(z1, z2, entailment, 0.1, w).item() for w in WEIGHTINGS}
    assert len({round(v, 6) for v in values.values()}) == 3
    # every negative orthogonal to its anchor (s_j = 0): all weights are 1, hardneg is plain InfoNCE
    basis = torch.eye(8)
    z1 = basis[:4]
    z2 = 0.8 * basis[:4] + 0.6 * basis[4:]  # cos(z1_i, z2_i) = 0.8, every other pair 0
    mask = torch.tensor([True, True, False, True])
    assert instance_discrimination_loss(z1, z2, mask, 0.2, "hardneg").item() == pytest.approx(
        instance_discrimination_loss(z1, z2, mask, 0.2, "orig").item(), rel=1e-6
    )


def test_only_entailment_anchors_count():
    z1, z2, _ = random_problem()
    only_first = torch.tensor([True, False, False, False, False])
    got = instance_discrimination_loss(z1.double(), z2.double(), only_first, 0.1, "orig")
    assert got.item() == pytest.approx(naive_instance_loss(z1, z2, only_first, 0.1, "orig"), rel=1e-9)
    all_pairs = instance_discrimination_loss(z1, z2, torch.ones(5, dtype=torch.bool), 0.1, "orig")
    assert abs(all_pairs.item() - got.item()) > 1e-3


@pytest.mark.parametrize("weighting", WEIGHTINGS)
def test_no_entailment_pair_gives_zero_and_finite_gradients(weighting):
    z1, z2, _ = random_problem()
    z1.requires_grad_(True)
    loss = instance_discrimination_loss(z1, z2, torch.zeros(5, dtype=torch.bool), 0.05, weighting)
    loss.backward()
    assert loss.item() == 0.0 and torch.isfinite(z1.grad).all() and z1.grad.abs().sum() == 0


def test_single_pair_has_no_negatives_and_zero_loss():
    z1, z2, _ = random_problem(m=1)
    z1.requires_grad_(True)
    loss = instance_discrimination_loss(z1, z2, torch.tensor([True]), 0.05, "hardneg")
    loss.backward()
    assert loss.item() == 0.0 and torch.isfinite(z1.grad).all()


@pytest.mark.parametrize("weighting", WEIGHTINGS)
def test_gradients_finite_at_small_temperature_with_near_duplicates(weighting):
    base = torch.randn(1, 16)
    z1 = (base + 1e-3 * torch.randn(6, 16)).requires_grad_(True)  # all cosines close to 1
    z2 = base + 1e-3 * torch.randn(6, 16)
    loss = instance_discrimination_loss(z1, z2, torch.ones(6, dtype=torch.bool), 0.01, weighting)
    loss.backward()
    assert torch.isfinite(loss) and torch.isfinite(z1.grad).all() and z1.grad.abs().sum() > 0


def test_instance_loss_rejects_bad_inputs():
    z1, z2, mask = random_problem()
    with pytest.raises(ValueError, match="weighting"):
        instance_discrimination_loss(z1, z2, mask, 0.05, "nope")
    with pytest.raises(ValueError, match="entailment mask"):
        instance_discrimination_loss(z1, z2, mask[:3], 0.05)


def test_pair_classification_loss_hand_value():
    u1 = torch.tensor([[1.0, 0.0]])
    u2 = torch.tensor([[0.0, 2.0]])
    assert pair_features(u1, u2).tolist() == [[1.0, 0.0, 0.0, 2.0, 1.0, 2.0]]
    weight = torch.tensor([[1.0, 0.0, 0.0, 0.0, 0.0, 0.0], [0.0, 0.0, 0.0, 1.0, 0.0, 0.5]])
    # logits = [1, 2 + 1] = [1, 3]; label 1: -log(e^3 / (e^1 + e^3)) = log(1 + e^-2)
    expected = math.log(1 + math.exp(-2))
    got = pair_classification_loss(u1, u2, torch.tensor([1]), weight)
    assert got.item() == pytest.approx(expected, rel=1e-6)
    # two pairs: the mean of both cross-entropies; label 0 gives log(1 + e^2)
    both = pair_classification_loss(torch.cat([u1, u1]), torch.cat([u2, u2]), torch.tensor([1, 0]), weight)
    assert both.item() == pytest.approx((expected + math.log(1 + math.exp(2))) / 2, rel=1e-6)


# -------------------------------------------------------------------------------- module
@pytest.fixture(scope="module")
def tiny_module_factory():
    from lightning_modules.pairsupcon.module import PairSupCon

    def make(**kwargs):
        torch.manual_seed(0)
        return PairSupCon(backbone="tiny", chunk_tokens=CHUNKS, **kwargs)

    return make


@pytest.mark.parametrize(
    "mode,heads,logged",
    [
        ("both", {"classifier", "contrast_head"}, {"cls_loss", "instance_loss"}),
        ("classification", {"classifier"}, {"cls_loss"}),
        ("instance", {"contrast_head"}, {"instance_loss"}),
    ],
)
def test_modes_build_only_their_heads_and_losses(tiny_module_factory, mode, heads, logged):
    module = tiny_module_factory(mode=mode, beta=0.5)
    built = {name for name in ("classifier", "contrast_head") if getattr(module, name) is not None}
    assert built == heads
    assert module.classifier is None or module.classifier.bias is None
    u1, u2 = torch.randn(4, 32), torch.randn(4, 32)
    labels = torch.tensor([1, 0, 1, 1])
    losses, total, backward = module.compute_losses(u1, u2, labels)
    assert {k for k in losses if k.endswith("_loss")} == logged
    values = {k: v.detach().item() for k, v in losses.items()}
    expected = values.get("cls_loss", 0.0) + 0.5 * values.get("instance_loss", 0.0)
    assert total.detach().item() == pytest.approx(float(expected), rel=1e-6)
    assert backward.detach().item() == pytest.approx(total.detach().item())
    if module.contrast_head is not None:
        out = module.contrast_head(u1)
        assert out.shape == (4, 128) and torch.allclose(out.norm(dim=1), torch.ones(4), atol=1e-5)
        assert all(layer.bias is None for layer in module.contrast_head.net if isinstance(layer, torch.nn.Linear))


def test_bad_options_are_rejected(tiny_module_factory):
    with pytest.raises(ValueError, match="method.mode"):
        tiny_module_factory(mode="all")
    with pytest.raises(ValueError, match="method.weighting"):
        tiny_module_factory(weighting="hard")


# -------------------------------------------------------------------------------- DDP
M, DIM = 6, 32


def ddp_problem():
    g = torch.Generator().manual_seed(1)
    u1, u2 = torch.randn(M, DIM, generator=g), torch.randn(M, DIM, generator=g)
    labels = torch.tensor([1, 0, 1, 1, 0, 1])  # the halves have different entailment counts
    return u1, u2, labels


def heads(seed=0):
    """The module's heads without its backbone: compute_losses needs nothing else."""
    from types import SimpleNamespace

    from lightning_modules.shared.heads import ContrastHead

    torch.manual_seed(seed)
    return SimpleNamespace(
        classifier=torch.nn.Linear(3 * DIM, 2, bias=False),
        contrast_head=ContrastHead(DIM, 128, bias=False),
        temperature=0.05,
        weighting="hardneg",
        beta=1.0,
    )


def head_grads(owner):
    params = {
        "classifier": owner.classifier.weight,
        **{f"head{i}": p for i, p in enumerate(owner.contrast_head.parameters())},
    }
    return {name: p.grad.clone() for name, p in params.items()}


def objective(owner, u1, u2, labels):
    return pairsupcon_objective(
        u1, u2, labels, owner.classifier.weight, owner.contrast_head, owner.temperature, owner.weighting, owner.beta
    )


def ddp_worker(rank, world, out_dir):
    owner = heads()
    u1, u2, labels = ddp_problem()
    half = slice(rank * M // world, (rank + 1) * M // world)
    losses, _, backward = objective(owner, u1[half], u2[half], labels[half])
    backward.backward()
    grads = head_grads(owner)
    for g in grads.values():  # DDP averages parameter gradients over processes
        dist.all_reduce(g)
        g /= world
    torch.save({"instance_loss": losses["instance_loss"].detach(), "grads": grads}, f"{out_dir}/rank{rank}.pt")


@pytest.mark.slow  # two spawned processes: ~10 s on 2 cores
def test_two_processes_give_single_process_loss_and_gradients(tmp_path):
    """Gathered negatives and labels: 2 x 3 pairs give the loss and gradients of 6 pairs in one process."""
    world = 2
    spawn_gloo(ddp_worker, world, tmp_path)
    owner = heads()
    u1, u2, labels = ddp_problem()
    losses, _, backward = objective(owner, u1, u2, labels)
    backward.backward()
    expected = head_grads(owner)
    for rank in range(world):
        result = torch.load(tmp_path / f"rank{rank}.pt")
        assert result["instance_loss"].item() == pytest.approx(losses["instance_loss"].item(), rel=1e-5)
        for name, grad in expected.items():
            assert torch.allclose(result["grads"][name], grad, atol=1e-6), name


# -------------------------------------------------------------------------------- smoke run
NLI_PAIRS = [
    ("A man is playing a guitar on stage.", "A person plays music.", "entailment"),
    ("A man is playing a guitar on stage.", "The man is sleeping at home.", "contradiction"),
    ("Two dogs run through the snow.", "Animals are outside.", "entailment"),
    ("Two dogs run through the snow.", "The cats are indoors.", "contradiction"),
    ("A woman slices bread in a kitchen.", "Someone is cooking.", "neutral"),
    ("A child kicks a red ball.", "A kid is playing.", "entailment"),
    ("A child kicks a red ball.", "The child is asleep.", "contradiction"),
    ("People wait for a train.", "A crowd is at a station.", "entailment"),
    ("People wait for a train.", "Nobody is at the station.", "contradiction"),
    ("A chef cooks pasta.", "Food is being prepared.", "entailment"),
    ("A chef cooks pasta.", "The chef is swimming.", "contradiction"),
    ("A boy reads a book.", "A book is being read.", "entailment"),
]


def write_tiny_sts(folder):
    """Minimal SentEval STS-B test and dev files (the other six STS tasks are absent and skipped)."""
    stsb = folder / "STS" / "STSBenchmark"
    stsb.mkdir(parents=True)
    rows = [
        ("A man plays guitar.", "A person plays music.", 4.2),
        ("A dog runs.", "A cat sleeps.", 0.8),
        ("Two kids play ball.", "Children are playing with a ball.", 4.6),
        ("A chef cooks.", "The train is late.", 0.1),
        ("A woman reads.", "A lady is reading a book.", 3.9),
        ("People dance.", "A man swims.", 1.0),
    ]
    lines = [f"main-captions\tMSRvid\t2012test\t{i:04d}\t{s}\t{a}\t{b}" for i, (a, b, s) in enumerate(rows)]
    (stsb / "sts-test.csv").write_text("\n".join(lines) + "\n")
    (stsb / "sts-dev.csv").write_text("\n".join(lines[::-1]) + "\n")  # sts_eval's dev score (the objective)
    return folder


def pairsupcon_overrides(nli_csv, sts_dir, steps=3, extra=()):
    return [
        "method=pairsupcon",
        "dataset=nli",
        "backbone=tiny",
        f"data_dir={nli_csv.parent}",
        f"dataset.file={nli_csv.name}",
        "batch_size=4",
        f"trainer.max_steps={steps}",
        "trainer.enable_progress_bar=false",
        "trainer.log_every_n_steps=1",
        "trainer.enable_model_summary=false",
        "~callbacks.progress",
        "method.lr=1e-3",  # large enough for three steps to move the tiny backbone visibly
        f"sts_data_dir={sts_dir}",
        "print_table=false",
        *extra,
    ]


@pytest.fixture
def tiny_nli(tmp_path):
    return write_csv(tmp_path / "nli.csv", ["sentence1", "sentence2", "gold_label"], [list(p) for p in NLI_PAIRS])


@pytest.mark.filterwarnings("ignore::evaluation.benchmarks.sts.StsDataMissingWarning")
def test_pairsupcon_trains_and_evaluates_at_the_end(tiny_nli, tmp_path):
    from ctclust.training.train import train
    from tests.helpers import compose_config

    sts_dir = write_tiny_sts(tmp_path / "senteval")
    short_text = tmp_path / "short_text"  # a fake AgNews (4 clusters) for the clustering callback
    short_text.mkdir()
    write_csv(short_text / "agnews.csv", ["label", "text0"], [[i % 4, f"topic {i % 4} text {i}"] for i in range(16)])
    clustering = [
        "method.callbacks.final_eval.tasks=[clustering]",
        f"method.callbacks.final_eval.short_text_dir={short_text}",
        "method.callbacks.final_eval.clustering_datasets=[agnews,tweet]",
        "method.callbacks.final_eval.seeds=2",
    ]
    out = tmp_path / "run"
    results = train(compose_config(pairsupcon_overrides(tiny_nli, sts_dir, extra=clustering), out))
    assert results["method"] == "pairsupcon" and results["steps"] == 3
    assert results["sts"]["weights"] == "final" and results["sts"]["avg_over"] == ["STSB"]
    assert -1 <= results["sts"]["avg"] <= 1
    assert results["sts"]["dev"]["step"] == 3 and -1 <= results["sts"]["dev"]["spearman"] <= 1
    assert results["objective"]["name"] == "sts.dev.spearman"
    assert results["objective"]["value"] == results["sts"]["dev"]["spearman"]
    sts = json.loads((out / "sts.json").read_text())
    assert list(sts["tasks"]) == ["STSB"] and sts["tasks"]["STSB"]["n"] == 6
    final = results["final_evaluation"]
    assert final["step"] == 3 and 0 <= final["headline"]["clustering ACC AG"] <= 100
    assert any("tweet skipped" in note for note in final["notes"])  # absent file: noted, not fatal
    evaluation = json.loads((out / "evaluation.json").read_text())
    assert evaluation["clustering"]["datasets"]["agnews"]["k"] == 4 and evaluation["clustering"]["seeds"] == [0, 1]
    header = (out / "csv" / "metrics.csv").read_text().splitlines()[0].split(",")
    assert {"train/cls_loss", "train/instance_loss", "train/loss"} <= set(header)
    saved = torch.load(out / "checkpoints" / "last.ckpt", weights_only=True)
    assert saved["hyper_parameters"]["weighting"] == "hardneg"
    assert saved["hyper_parameters"]["temperature"] == 0.05

    # the evaluation loader restores the trained encoder from the run directory and from a bare copy
    from evaluation.model_io.load import load_encoder

    texts = ["A man plays guitar.", "Two dogs run."]
    encoder, pooling = load_encoder(out)
    bare = tmp_path / "copy.ckpt"
    bare.write_bytes((out / "checkpoints" / "last.ckpt").read_bytes())
    rebuilt, rebuilt_pooling = load_encoder(bare)
    assert pooling == rebuilt_pooling == "mean"
    assert torch.allclose(encoder.encode(texts), rebuilt.encode(texts), atol=1e-6)
    untrained, _ = load_encoder("tiny")
    assert not torch.allclose(encoder.encode(texts), untrained.encode(texts), atol=1e-4)


@pytest.mark.parametrize("row,backbone", [("pairsupcon_bert_base", "bert-base-uncased"),
                                          ("pairsupcon_bert_large", "bert-large-uncased"),
                                          ("pairsupcon_distilbert_base", "distilbert-base-uncased")])
def test_paper_rows_train_and_evaluate_as_the_authors(tmp_path, row, backbone):
    from tests.helpers import compose_config

    cfg = compose_config([f"experiment={row}"], tmp_path)
    assert cfg.backbone.name == backbone and (cfg.batch_size, cfg.max_length, cfg.seed) == (1024, 32, 0)
    m = cfg.method
    assert (m.mode, m.weighting, m.beta, m.temperature, m.lr, m.head_lr_multiplier) == (
        "both", "hardneg", 1.0, 0.05, 5e-6, 100.0)
    assert cfg.trainer.max_epochs == 3 and cfg.trainer.precision == "32-true"
    # the authors' evaluation embeds at 64 tokens for clustering and STS
    assert m.callbacks.final_eval.clustering_max_length == 64 and m.callbacks.sts_eval.max_length == 64


def test_final_evaluation_passes_its_token_limits(monkeypatch):
    import callbacks.evaluation.final_eval as final_eval

    seen = {}

    def fake_evaluate(encoder, pooling, tasks, **kwargs):
        seen.update(kwargs)
        return {"notes": []}

    monkeypatch.setattr(final_eval, "evaluate_encoder", fake_evaluate)
    callback = final_eval.FinalEvaluation(tasks=["clustering"], clustering_max_length=64, kmeans_backend=KMEANS)
    trainer = type("T", (), {"is_global_zero": True, "global_step": 3})()
    module = type("M", (), {"encoder": None, "eval_pooling": "mean"})()
    callback.on_train_end(trainer, module)
    assert seen["clustering_max_length"] == 64
    with pytest.raises(ConfigError, match="method.callbacks.sts_eval"):  # one end-of-training STS path
        final_eval.FinalEvaluation(tasks=["clustering", "sts"], kmeans_backend=KMEANS)


def test_distilbert_row_runs_a_few_steps_on_the_tiny_backbone(tmp_path, tiny_nli):
    import warnings

    from ctclust.training.train import train
    from tests.helpers import compose_config

    sts_dir = write_tiny_sts(tmp_path / "senteval")
    overrides = pairsupcon_overrides(tiny_nli, sts_dir, steps=2)
    overrides[0] = "experiment=pairsupcon_distilbert_base"
    overrides += ["trainer=cpu", "trainer.max_epochs=-1", "method.callbacks.final_eval.tasks=[]"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the six absent STS tasks
        results = train(compose_config(overrides, tmp_path / "run"))
    assert results["steps"] == 2 and results["method"] == "pairsupcon"
    assert results["sts"]["max_length"] == 64  # the authors' evaluation length
