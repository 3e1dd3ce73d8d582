"""ClusterNS (docs/methods/clusterns.md): the warm-up schedule, update orders and ablations of the module, DDP
agreement, resume from a checkpoint, and an end-to-end run through run.py on the tiny backbone. Its clustering
maths: tests/lightning_modules/shared/test_inbatch_clustering.py; BML: test_losses.py."""
import json
import math

import pytest
import torch
import torch.nn.functional as F

from lightning_modules.shared.inbatch_clustering import (
    assign,
    hard_negative_select,
    momentum_update,
    same_cluster_mask,
)
from lightning_modules.simcse.losses import infonce_with_hard_negatives
from tests.helpers.clusterns import naive_bml, naive_greedy
from tests.helpers.speed import CHUNKS

# the module tests call training_step without a Trainer; self.log then only warns
pytestmark = pytest.mark.filterwarnings("ignore:You are trying to `self.log\\(\\)`")


# -------------------------------------------------------------------------------------- module schedule


D = 32  # width of the tiny backbone, where the centroids live


def make_module(**kwargs):
    from lightning_modules.clusterns.module import ClusterNS

    defaults = dict(num_clusters=3, backbone="tiny", chunk_tokens=CHUNKS, temperature=0.05, momentum=0.1,
                    kmean_cosine=0.4, bml_weight=0.5, bml_alpha=0.1, bml_beta=0.3, seed=0)
    return ClusterNS(**{**defaults, **kwargs})


def feed(module, z1, z2):
    """Make the module's next training step see these gathered views."""
    module.contrastive_inputs = lambda batch: (z1, z2)
    return module.training_step({}, 0)


def test_warmup_then_init_then_clustered_loss(recwarn):
    module = make_module()
    g = torch.Generator().manual_seed(0)
    base = torch.randn(1, D, generator=g)
    similar = base + 0.01 * torch.randn(6, D, generator=g)  # mean cosine ~1 > σ
    loss = feed(module, similar, similar.clone())
    assert not bool(module.clustering_started)
    assert loss.item() == pytest.approx(infonce_with_hard_negatives(similar, similar, 0.05).item())

    z1 = torch.randn(6, D, generator=g)  # mean cosine ~0 <= σ: initialise here, plain loss this step
    z2 = z1 + 0.1 * torch.randn(6, D, generator=g)
    loss = feed(module, z1, z2)
    assert bool(module.clustering_started) and int(module.clustering_start_step) == 0
    sim = F.normalize(z1, dim=1) @ F.normalize(z2, dim=1).T
    first = [i for i in range(6) if torch.equal(z1[i], module.centroids[0])]
    assert len(first) == 1  # the first centroid is a first-view vector of the batch
    assert torch.equal(module.centroids, z1[naive_greedy(sim, 3, first[0])])
    assert loss.item() == pytest.approx(infonce_with_hard_negatives(z1, z2, 0.05).item())

    # next step (default update_order=before_loss): assign with the old centroids, momentum update,
    # assign again to the updated centroids, second-nearest updated centroid as hard negative, BML
    old = module.centroids.clone()
    z1b = torch.randn(6, D, generator=g, requires_grad=True)
    z2b = z1b.detach() + 0.1 * torch.randn(6, D, generator=g)
    loss = feed(module, z1b, z2b)
    labels, _ = assign(z1b.detach(), old)
    updated = momentum_update(old, z1b.detach(), labels, 0.1, "mean")
    assert torch.allclose(module.centroids, updated)
    labels, _ = assign(z1b.detach(), updated)
    _, hard, _ = hard_negative_select(z1b.detach(), updated, "second")
    sim_b = F.normalize(z1b, dim=1) @ F.normalize(z2b, dim=1).T
    expected = infonce_with_hard_negatives(z1b, z2b, 0.05, hard, 1.0) + 0.5 * naive_bml(
        sim_b, same_cluster_mask(labels), 0.1, 0.3, "members")
    assert loss.item() == pytest.approx(expected.item(), rel=1e-5)
    loss.backward()
    assert torch.isfinite(z1b.grad).all()


def _order_batch():
    """Three anchors in the first two of D dimensions and two centroids on the axes. With γ = 1 and
    mean updates the new centroids are the members' means: c0' = mean(s, t) = (0.6, -0.05) and
    c1' = u = (0.1, 1). Sample s = (1, 0.9) is nearer c0 before the update (cos 0.743 vs 0.669) and
    nearer c1' after it (0.740 vs 0.685): it changes cluster."""

    def vec(a, b):
        v = torch.zeros(D)
        v[0], v[1] = a, b
        return v

    z1 = torch.stack([vec(1.0, 0.9), vec(0.2, -1.0), vec(0.1, 1.0)])  # s, t, u
    g = torch.Generator().manual_seed(3)
    z2 = z1 + 0.05 * torch.randn(3, D, generator=g)
    old = torch.stack([vec(1.0, 0.0), vec(0.0, 1.0)])
    new = torch.stack([vec(0.6, -0.05), vec(0.1, 1.0)])
    return z1, z2, old, new


# hand-derived: assignment to old centroids [0, 0, 1], to updated ones [1, 0, 1]; with K = 2 the
# second-nearest centroid is the other one
ORDER_CASES = {
    "before_loss": ([1, 0, 1], "new", [0, 1, 0]),
    "after_loss": ([0, 0, 1], "old", [1, 1, 0]),
    "between": ([0, 0, 1], "new", [0, 1, 0]),
}


@pytest.mark.parametrize("order", sorted(ORDER_CASES))
def test_update_order_on_a_sample_that_changes_cluster(order):
    z1, z2, old, new = _order_batch()
    labels, which, hard_rows = ORDER_CASES[order]
    assert assign(z1, old)[0].tolist() == [0, 0, 1] and assign(z1, new)[0].tolist() == [1, 0, 1]
    module = make_module(num_clusters=2, momentum=1.0, update_order=order, bml_alpha=0.0, bml_beta=0.05)
    module.centroids.copy_(old)
    module.load_state_dict({**module.state_dict(), "clustering_started": torch.tensor(True)})  # as a resumed run
    assignment, hard, seen = module.cluster_step(z1, step=5)
    assert torch.allclose(module.centroids, new)  # the centroids move once, whatever the order
    assert assignment.tolist() == labels
    centroids = {"old": old, "new": new}[which]
    assert torch.allclose(seen, centroids) and torch.allclose(hard, centroids[hard_rows])

    module.centroids.copy_(old)  # the same step through training_step: the loss uses that mask and those negatives
    loss = feed(module, z1, z2)
    sim = F.normalize(z1, dim=1) @ F.normalize(z2, dim=1).T
    expected = infonce_with_hard_negatives(z1, z2, 0.05, centroids[hard_rows], 1.0) + 0.5 * naive_bml(
        sim, same_cluster_mask(torch.tensor(labels)), 0.0, 0.05, "members")
    assert loss.item() == pytest.approx(expected.item(), rel=1e-5)


def test_the_three_update_orders_give_three_losses():
    z1, z2, old, _ = _order_batch()
    losses = {}
    for order in ORDER_CASES:
        module = make_module(num_clusters=2, momentum=1.0, update_order=order, bml_alpha=0.0, bml_beta=0.05)
        module.centroids.copy_(old)
        module.load_state_dict({**module.state_dict(), "clustering_started": torch.tensor(True)})  # as a resumed run
        losses[order] = feed(module, z1, z2).item()
    values = sorted(losses.values())
    assert values[1] - values[0] > 1e-4 and values[2] - values[1] > 1e-4, losses


@pytest.mark.parametrize("switch,value", [("hard_negatives", "none"), ("false_negatives", "none"),
                                          ("hard_negatives", "nearest"), ("cluster_assignment", "random")])
def test_ablation_switches_change_the_clustered_loss(switch, value):
    g = torch.Generator().manual_seed(1)
    z1 = torch.randn(8, D, generator=g)
    z2 = z1 + 0.3 * torch.randn(8, D, generator=g)
    losses = {}
    for name, kwargs in (("paper", {}), ("ablation", {switch: value})):
        module = make_module(kmean_cosine=1.0, momentum=0.5, **kwargs)
        feed(module, z1, z2)  # initialise
        losses[name] = feed(module, z1, z2).item()
    assert math.isfinite(losses["ablation"]) and losses["ablation"] != pytest.approx(losses["paper"], rel=1e-6)


def test_without_hard_and_false_negatives_clusterns_is_simcse():
    g = torch.Generator().manual_seed(1)
    z1 = torch.randn(8, D, generator=g)
    z2 = z1 + 0.3 * torch.randn(8, D, generator=g)
    module = make_module(kmean_cosine=1.0, hard_negatives="none", false_negatives="none")
    feed(module, z1, z2)
    assert feed(module, z1, z2).item() == pytest.approx(infonce_with_hard_negatives(z1, z2, 0.05).item())
    assert bool(module.clustering_started)  # the clustering still runs (diagnostics), without losses


def test_bad_switch_values_are_clear_errors():
    with pytest.raises(ValueError, match="hard_negatives"):
        make_module(hard_negatives="third")
    with pytest.raises(ValueError, match="num_clusters"):
        make_module(num_clusters=1)
    with pytest.raises(ValueError, match="update_order"):
        make_module(update_order="during_loss")


def test_small_batch_waits_for_a_full_one():
    module = make_module(num_clusters=5, kmean_cosine=1.0)
    z = torch.randn(4, D)
    feed(module, z, z.clone())
    assert not bool(module.clustering_started)
    z = torch.randn(6, D)
    feed(module, z, z.clone())
    assert bool(module.clustering_started)


def test_cluster_state_is_in_the_state_dict():
    module = make_module(kmean_cosine=1.0)
    z = torch.randn(6, D)
    feed(module, z, z + 0.1)
    state = module.state_dict()
    assert {"centroids", "clustering_started", "clustering_start_step"} <= set(state)
    fresh = make_module(kmean_cosine=1.0)
    assert not bool(fresh.clustering_started)
    fresh.load_state_dict(state)
    assert bool(fresh.clustering_started) and torch.equal(fresh.centroids, module.centroids)


# -------------------------------------------------------------------------------------- DDP


def _ddp_worker(rank, world, out_dir):
    from lightning_modules.shared.distributed import gather_with_grad

    torch.manual_seed(100 + rank)  # different local RNGs must not matter
    module = make_module(num_clusters=3, kmean_cosine=1.0, momentum=0.3)
    z1, z2 = _ddp_problem()
    half = slice(rank * 4, (rank + 1) * 4)
    losses = []
    for _ in range(3):
        local = z1[half].clone().requires_grad_(True)
        module.contrastive_inputs = lambda batch, a=local, b=z2[half]: (gather_with_grad(a), gather_with_grad(b))
        losses.append(module.training_step({}, 0).detach() / world)  # undo ddp_loss_scale
    torch.save({"losses": losses, "centroids": module.centroids}, f"{out_dir}/rank{rank}.pt")


def _ddp_problem():
    g = torch.Generator().manual_seed(9)
    z1 = torch.randn(8, D, generator=g)
    return z1, z1 + 0.2 * torch.randn(8, D, generator=g)


@pytest.mark.slow  # two processes importing the stack: ~30 s on a loaded 2-core machine
def test_two_ranks_agree_with_one_process(tmp_path):
    from tests.helpers.ddp import spawn_gloo

    spawn_gloo(_ddp_worker, 2, tmp_path)
    ranks = [torch.load(tmp_path / f"rank{r}.pt") for r in range(2)]
    single = make_module(num_clusters=3, kmean_cosine=1.0, momentum=0.3)
    z1, z2 = _ddp_problem()
    expected = [feed(single, z1, z2).item() for _ in range(3)]
    for result in ranks:
        assert torch.equal(result["centroids"], ranks[0]["centroids"])
        assert torch.allclose(result["centroids"], single.centroids, atol=1e-6)
        assert [v.item() for v in result["losses"]] == pytest.approx(expected, rel=1e-5)


# -------------------------------------------------------------------------------------- end to end


def write_wiki(path, n=120):
    import random

    rng = random.Random(0)
    words = "river bank money loan music guitar drum song field goal team match".split()
    path.write_text("\n".join(" ".join(rng.sample(words, 5)) + f" {i}" for i in range(n)) + "\n")
    return path


def write_stsb(root, split, n=20):
    import random

    rng = random.Random(split)
    words = "a small cat sat on the mat while dog ran in park".split()
    folder = root / "STS" / "STSBenchmark"
    folder.mkdir(parents=True, exist_ok=True)
    def sentence():
        return " ".join(rng.sample(words, 5))

    rows = [f"g\tf\ty\t{i:04d}\t{rng.uniform(0, 5):.2f}\t{sentence()}\t{sentence()}" for i in range(n)]
    (folder / f"sts-{split}.csv").write_text("\n".join(rows) + "\n")


@pytest.fixture
def wiki_setup(tmp_path):
    wiki = write_wiki(tmp_path / "wiki.txt")
    sts = tmp_path / "sts"
    write_stsb(sts, "dev")
    write_stsb(sts, "test")
    return wiki, sts


def clusterns_overrides(wiki, sts, steps, extra=()):
    return [
        "method=clusterns", "dataset=wiki", "backbone=tiny", f"data_dir={wiki.parent}", f"dataset.path={wiki}",
        f"sts_data_dir={sts}", "batch_size=8", "method.num_clusters=4", "method.kmean_cosine=1.0",
        f"trainer.max_steps={steps}", "trainer.log_every_n_steps=1", "trainer.enable_progress_bar=false",
        "trainer.enable_model_summary=false", "~callbacks.progress", "print_table=false",
        "method.callbacks.sts_selection.every_n_steps=2",
        *extra,
    ]


def test_clusterns_end_to_end_writes_sts_outputs(wiki_setup, tmp_path):
    from ctclust.training.train import train
    from tests.helpers import compose_config

    wiki, sts = wiki_setup
    out = tmp_path / "run"
    with pytest.warns(Warning, match="STS12"):
        results = train(compose_config(clusterns_overrides(wiki, sts, 4), out))
    assert results["steps"] == 4
    saved = json.loads((out / "results.json").read_text())
    assert [h["step"] for h in saved["sts_selection"]["history"]] == [2, 4]
    assert saved["sts"]["avg_over"] == ["STSB"] and "STS12" in saved["sts"]["skipped"]
    assert saved["sts"]["weights"] == "best" and saved["sts"]["step"] == saved["sts_selection"]["best_step"]
    assert -1.0 <= saved["sts"]["avg"] <= 1.0
    assert (out / "sts.md").read_text().count("| STSB |") == 1 and (out / "checkpoints" / "best.ckpt").is_file()
    header = (out / "csv" / "metrics.csv").read_text().splitlines()[0].split(",")
    for key in ("train/sim_positive", "train/sim_in_batch_negative", "train/sim_hard_negative",
                "train/sim_sample_centroid", "train/sim_inter_centroid", "train/same_cluster_pair_rate",
                "train/bml_loss", "val/stsb_spearman"):
        assert key in header, key
    last = torch.load(out / "checkpoints" / "last.ckpt", weights_only=True)["state_dict"]
    assert bool(last["clustering_started"]) and int(last["clustering_start_step"]) == 0
    # the command-line evaluation of best.ckpt reproduces the end-of-training table
    from ctclust.commands.sts import main

    cli = main(["--checkpoint", str(out / "checkpoints" / "best.ckpt"), "--data-dir", str(sts), "--tasks", "STSB"])
    assert cli["avg"] == pytest.approx(saved["sts"]["avg"], abs=1e-9)


def test_resume_keeps_centroids_and_does_not_reinitialise(wiki_setup, tmp_path, monkeypatch):
    import lightning_modules.clusterns.module as clusterns
    from ctclust.training.train import train
    from tests.helpers import compose_config

    wiki, sts = wiki_setup
    train(compose_config(clusterns_overrides(wiki, sts, 3), tmp_path / "part"))
    ckpt = tmp_path / "part" / "checkpoints" / "last.ckpt"
    saved = torch.load(ckpt, weights_only=True)
    assert bool(saved["state_dict"]["clustering_started"])

    def fail(*args, **kwargs):
        raise AssertionError("centroids were re-initialised on resume")

    monkeypatch.setattr(clusterns, "greedy_init_indices", fail)
    seen = {}
    original = clusterns.ClusterNS.cluster_step

    def spy(self, x, step):
        seen.setdefault("centroids", self.centroids.clone())
        return original(self, x, step)

    monkeypatch.setattr(clusterns.ClusterNS, "cluster_step", spy)
    resumed = train(compose_config(clusterns_overrides(wiki, sts, 5, [f"ckpt_path={ckpt}"]), tmp_path / "resumed"))
    assert resumed["steps"] == 5
    assert torch.equal(seen["centroids"], saved["state_dict"]["centroids"])
    part_history = saved["callbacks"]["StsSelection"]["history"]
    assert resumed["sts_selection"]["history"][: len(part_history)] == part_history
