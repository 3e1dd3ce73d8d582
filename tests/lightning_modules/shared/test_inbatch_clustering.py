"""In-batch clustering (lightning_modules/shared/inbatch_clustering.py, ClusterNS's clustering): greedy
initialisation, assignment, momentum update, hard negatives and diagnostics against naive loops."""

import pytest
import torch
import torch.nn.functional as F

from lightning_modules.shared.inbatch_clustering import (
    assign,
    clustering_diagnostics,
    greedy_init_indices,
    hard_negative_select,
    momentum_update,
    same_cluster_mask,
)
from tests.helpers.clusterns import cos, naive_greedy

# the module tests call training_step without a Trainer; self.log then only warns
pytestmark = pytest.mark.filterwarnings("ignore:You are trying to `self.log\\(\\)`")


# -------------------------------------------------------------------------------------- greedy init


def test_greedy_init_follows_least_similar_chain_and_never_repeats():
    g = torch.Generator().manual_seed(0)
    sim = torch.rand(12, 12, generator=g) * 2 - 1
    chosen = greedy_init_indices(sim, 7, torch.Generator().manual_seed(3)).tolist()
    assert chosen == naive_greedy(sim, 7, chosen[0])
    assert len(set(chosen)) == 7
    # K = N visits every sample once
    assert sorted(greedy_init_indices(sim, 12, torch.Generator().manual_seed(1)).tolist()) == list(range(12))


def test_greedy_init_first_sample_is_seeded_random():
    sim = torch.rand(50, 50, generator=torch.Generator().manual_seed(0))
    firsts = {int(greedy_init_indices(sim, 3, torch.Generator().manual_seed(s))[0]) for s in range(20)}
    assert len(firsts) > 5  # not always the same sample
    again = [greedy_init_indices(sim, 5, torch.Generator().manual_seed(7)).tolist() for _ in range(2)]
    assert again[0] == again[1]


def test_greedy_init_reads_rows_as_first_views_and_columns_as_second_views():
    # asymmetric matrix: the next centroid must be the argmin of the *row* of the last one
    sim = torch.tensor([[1.0, 0.5, -0.9, 0.0], [0.9, 1.0, 0.9, 0.9], [0.9, -0.5, 1.0, 0.2], [0.9, 0.9, 0.9, 1.0]])
    for seed in range(30):
        chosen = greedy_init_indices(sim, 3, torch.Generator().manual_seed(seed)).tolist()
        if chosen[0] == 0:
            assert chosen == [0, 2, 1]  # row 0 -> column 2 (-0.9); row 2 -> column 1 (-0.5)
            break
    else:
        pytest.fail("first index 0 never drawn")


def test_greedy_init_needs_k_at_most_batch():
    with pytest.raises(ValueError, match="num_clusters"):
        greedy_init_indices(torch.zeros(4, 4), 5)


# -------------------------------------------------------------------------------------- assignment, update


def test_assign_is_most_cosine_similar_centroid():
    g = torch.Generator().manual_seed(1)
    x, c = torch.randn(9, 5, generator=g), torch.randn(4, 5, generator=g) * torch.tensor([[1.0], [5.0], [0.1], [2.0]])
    labels, sim = assign(x, c)
    for i in range(9):
        values = [cos(x[i], c[k]) for k in range(4)]
        assert labels[i].item() == max(range(4), key=lambda k: values[k])
        assert sim[i].tolist() == pytest.approx(values, abs=1e-6)


@pytest.mark.parametrize("reduce", ["mean", "sum"])
def test_momentum_update_against_loop(reduce):
    g = torch.Generator().manual_seed(2)
    c, x = torch.randn(4, 3, generator=g), torch.randn(7, 3, generator=g)
    labels = torch.tensor([0, 0, 2, 2, 2, 0, 3])  # cluster 1 has no member
    gamma = 0.1
    new = momentum_update(c, x, labels, gamma, reduce)
    for k in range(4):
        members = [x[i] for i in range(7) if labels[i] == k]
        if not members:
            expected = c[k]
        else:
            agg = sum(members) / len(members) if reduce == "mean" else sum(members)
            expected = (1 - gamma) * c[k] + gamma * agg
        assert torch.allclose(new[k], expected, atol=1e-6), k
    assert torch.equal(new[1], c[1])


def test_momentum_update_rejects_unknown_reduction():
    with pytest.raises(ValueError, match="mean"):
        momentum_update(torch.zeros(2, 2), torch.zeros(1, 2), torch.tensor([0]), 0.1, "median")


@pytest.mark.parametrize("rank,position", [("second", 1), ("nearest", 0)])
def test_hard_negative_select_against_sorting(rank, position):
    g = torch.Generator().manual_seed(3)
    x, c = torch.randn(8, 6, generator=g), torch.randn(5, 6, generator=g)
    idx, vectors, values = hard_negative_select(x, c, rank)
    for i in range(8):
        order = sorted(range(5), key=lambda k: -cos(x[i], c[k]))
        assert idx[i].item() == order[position]
        assert torch.equal(vectors[i], c[order[position]])
        assert values[i].item() == pytest.approx(cos(x[i], c[order[position]]), abs=1e-6)
    assert not vectors.requires_grad


def test_same_cluster_mask_excludes_self():
    labels = torch.tensor([1, 0, 1, 1, 2])
    mask = same_cluster_mask(labels)
    for i in range(5):
        for j in range(5):
            assert mask[i, j].item() == (i != j and labels[i] == labels[j])


# -------------------------------------------------------------------------------------- diagnostics


def test_clustering_diagnostics_against_loops():
    g = torch.Generator().manual_seed(6)
    x, z2, c = torch.randn(6, 4, generator=g), torch.randn(6, 4, generator=g), torch.randn(3, 4, generator=g)
    labels = torch.tensor([0, 0, 1, 2, 2, 2])
    hard = c[torch.tensor([1, 1, 0, 0, 1, 0])]
    sim = F.normalize(x, dim=1) @ F.normalize(z2, dim=1).T
    stats = clustering_diagnostics(sim, x, c, labels, hard)
    pairs = [(i, j) for i in range(6) for j in range(6) if i != j and labels[i] == labels[j]]
    assert stats["same_cluster_pair_rate"] == pytest.approx(len(pairs) / 30)  # 8 of 30 negative pairs
    assert stats["sim_same_cluster"] == pytest.approx(sum(sim[i, j].item() for i, j in pairs) / len(pairs), abs=1e-6)
    assert stats["samples_with_cluster_mates"] == pytest.approx(5 / 6)  # sample 2 is alone
    assert stats["clusters_used"] == 3
    assert stats["sim_sample_centroid"] == pytest.approx(sum(cos(x[i], c[labels[i]]) for i in range(6)) / 6, abs=1e-6)
    inter = [cos(c[a], c[b]) for a in range(3) for b in range(3) if a != b]
    assert stats["sim_inter_centroid"] == pytest.approx(sum(inter) / 6, abs=1e-6)
    assert stats["sim_hard_negative"] == pytest.approx(sum(cos(x[i], hard[i]) for i in range(6)) / 6, abs=1e-6)
