"""ClusterNS's boundary margin loss (lightning_modules/clusterns/losses.py, BML) against a naive loop."""

import pytest
import torch

from lightning_modules.clusterns.losses import bml_loss
from lightning_modules.shared.inbatch_clustering import (
    same_cluster_mask,
)
from tests.helpers.clusterns import naive_bml

# the module tests call training_step without a Trainer; self.log then only warns
pytestmark = pytest.mark.filterwarnings("ignore:You are trying to `self.log\\(\\)`")


# -------------------------------------------------------------------------------------- losses


@pytest.mark.parametrize("reduction", ["members", "matrix"])
@pytest.mark.parametrize("alpha,beta", [(0.0, 0.3), (0.2, 0.5)])
def test_bml_loss_against_loop_with_finite_gradients(reduction, alpha, beta):
    g = torch.Generator().manual_seed(4)
    sim = (torch.rand(6, 6, generator=g) * 2 - 1).requires_grad_(True)
    labels = torch.tensor([0, 1, 0, 2, 0, 1])
    same = same_cluster_mask(labels)
    got = bml_loss(sim, same, alpha, beta, reduction)
    expected = naive_bml(sim, same, alpha, beta, reduction)
    assert got.item() == pytest.approx(expected.item(), abs=1e-6)
    (grad,) = torch.autograd.grad(got, sim)
    (expected_grad,) = torch.autograd.grad(expected, sim)
    assert torch.isfinite(grad).all() and torch.allclose(grad, expected_grad, atol=1e-6)


def test_bml_penalises_only_outside_the_band():
    # Δ = sim_ij - sim_ii must lie in [-β, -α]; positive sim 0.9
    def loss(member_sim):
        sim = torch.tensor([[0.9, member_sim], [member_sim, 0.9]])
        return bml_loss(sim, torch.tensor([[False, True], [True, False]]), alpha=0.1, beta=0.4).item()

    assert loss(0.7) == pytest.approx(0.0)          # Δ = -0.2, inside
    assert loss(0.85) == pytest.approx(0.05)        # Δ = -0.05 > -α: too close to the positive
    assert loss(0.3) == pytest.approx(0.2)          # Δ = -0.6 < -β: pushed too far


def test_bml_without_members_is_zero_but_differentiable():
    sim = torch.rand(3, 3, requires_grad=True)
    out = bml_loss(sim, torch.zeros(3, 3, dtype=torch.bool))
    assert out.item() == 0.0
    out.backward()
    assert torch.equal(sim.grad, torch.zeros(3, 3))
