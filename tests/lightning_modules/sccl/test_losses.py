"""SCCL's losses against naive loops and hand-computed values."""
import math

import torch
import torch.nn.functional as F

from lightning_modules.sccl.losses import cluster_kl_loss, student_t_assignment, target_distribution
from lightning_modules.shared.contrastive import nt_xent


def naive_nt_xent(z1, z2, tau):
    z = [F.normalize(v, dim=0) for v in torch.cat([z1, z2])]
    n = len(z1)
    total = 0.0
    for a in range(2 * n):
        b = a + n if a < n else a - n
        numerator = math.exp(float(z[a] @ z[b]) / tau)
        denominator = sum(math.exp(float(z[a] @ z[k]) / tau) for k in range(2 * n) if k != a)
        total += -math.log(numerator / denominator)
    return total / (2 * n)


def test_nt_xent_matches_naive_loop():
    g = torch.Generator().manual_seed(0)
    z1, z2 = torch.randn(5, 7, generator=g), torch.randn(5, 7, generator=g)
    for tau in (0.5, 0.05, 1.0):
        expected = torch.tensor(naive_nt_xent(z1, z2, tau), dtype=torch.float32)
        assert torch.isclose(nt_xent(z1, z2, tau), expected, atol=1e-5)


def test_nt_xent_hand_value_two_orthogonal_pairs():
    # views identical, the two instances orthogonal: each anchor has sim 1 to its partner,
    # 0 to the two others -> loss = -log(e^{1/τ} / (e^{1/τ} + 2))
    z = torch.eye(2)
    tau = 0.5
    expected = -math.log(math.exp(2) / (math.exp(2) + 2))
    assert abs(nt_xent(z, z.clone(), tau).item() - expected) < 1e-6


def test_nt_xent_gradients_finite():
    z1 = torch.randn(4, 3, requires_grad=True)
    z2 = torch.randn(4, 3, requires_grad=True)
    nt_xent(z1, z2, 0.05).backward()
    assert torch.isfinite(z1.grad).all() and torch.isfinite(z2.grad).all()
    assert z1.grad.abs().sum() > 0


def test_student_t_matches_loop_and_rows_sum_to_one():
    g = torch.Generator().manual_seed(1)
    e, mu = torch.randn(6, 4, generator=g), torch.randn(3, 4, generator=g)
    for alpha in (1.0, 10.0):
        q = student_t_assignment(e, mu, alpha)
        for j in range(6):
            kernel = [(1 + float(((e[j] - mu[k]) ** 2).sum()) / alpha) ** (-(alpha + 1) / 2) for k in range(3)]
            for k in range(3):
                assert abs(q[j, k].item() - kernel[k] / sum(kernel)) < 1e-5
        assert torch.allclose(q.sum(1), torch.ones(6))


def test_student_t_hand_value():
    # distances² 0 and 1, α=1: kernels 1 and 1/2 -> q = (2/3, 1/3)
    q = student_t_assignment(torch.tensor([[0.0, 0.0]]), torch.tensor([[0.0, 0.0], [1.0, 0.0]]), 1.0)
    assert torch.allclose(q, torch.tensor([[2 / 3, 1 / 3]]))


def test_target_distribution_hand_value():
    q = torch.tensor([[0.5, 0.5], [0.9, 0.1]])
    f = [1.4, 0.6]
    rows = [[0.25 / f[0], 0.25 / f[1]], [0.81 / f[0], 0.01 / f[1]]]
    expected = torch.tensor([[r[0] / sum(r), r[1] / sum(r)] for r in rows])
    p = target_distribution(q)
    assert torch.allclose(p, expected, atol=1e-6)
    assert not p.requires_grad


def test_cluster_kl_matches_loop_and_gradients():
    g = torch.Generator().manual_seed(2)
    logits = torch.randn(5, 3, generator=g, requires_grad=True)
    q = logits.softmax(1)
    p = target_distribution(q)
    qd = q.detach()
    expected = sum(float(p[j, k] * math.log(p[j, k] / qd[j, k])) for j in range(5) for k in range(3)) / 5
    loss = cluster_kl_loss(q, p)
    assert abs(loss.item() - expected) < 1e-6
    loss.backward()
    assert torch.isfinite(logits.grad).all() and logits.grad.abs().sum() > 0


def test_cluster_kl_is_zero_when_q_equals_p():
    q = torch.tensor([[0.7, 0.3], [0.2, 0.8]])
    assert cluster_kl_loss(q, q).item() < 1e-7
