"""AECL's losses (lightning_modules/aecl/losses.py) against naive loops and hand values."""
import math

import pytest
import torch

from lightning_modules.aecl.losses import (
    cluster_contrastive_loss,
    marginal_entropy,
    marginal_entropy_term,
    pseudo_label_loss,
    row_entropy,
    row_entropy_term,
    similarity_guided_loss,
)
from lightning_modules.shared.contrastive import nt_xent


def cos(a, b):
    return float(torch.dot(a, b) / (a.norm() * b.norm()))


def batch(n=5, d=4, seed=0, clusters=(0, 1, 0, 2, 1)):
    g = torch.Generator().manual_seed(seed)
    z0, z1, h0, h1 = (torch.randn(n, d, generator=g, dtype=torch.float64) for _ in range(4))
    s0 = torch.softmax(torch.randn(n, n, generator=g, dtype=torch.float64), dim=1)
    s1 = torch.softmax(torch.randn(n, n, generator=g, dtype=torch.float64), dim=1)
    return z0, z1, h0, h1, s0, s1, torch.tensor(clusters[:n])


def naive_two_view_ratio(z0, z1, i, tau):
    """l1_i of eq 6 written out: both directions' ratios over the 2N-2 negatives of sample i."""
    def e(a, b):
        return math.exp(cos(a, b) / tau)

    others = [k for k in range(len(z0)) if k != i]
    return (e(z0[i], z1[i]) / sum(e(z0[i], z0[k]) + e(z0[i], z1[k]) for k in others)
            + e(z1[i], z0[i]) / sum(e(z1[i], z1[k]) + e(z1[i], z0[k]) for k in others))


def naive_paper_li(z0, z1, h0, h1, s0, s1, clusters, tau):
    """Eqs 6, 7, 9 written as loops."""
    n = len(z0)

    def e(a, b):
        return math.exp(cos(a, b) / tau)

    total = 0.0
    for i in range(n):
        others = [k for k in range(n) if k != i]
        l1 = naive_two_view_ratio(z0, z1, i, tau)
        same = [j for j in range(n) if clusters[j] == clusters[i]]
        for z, h, s in ((z0, h0, s0), (z1, h1, s1)):
            l2 = sum(s[i, j] * e(z[i], h[j]) for j in same) / sum(e(z[i], z[k]) + e(z[i], h[k]) for k in others)
            l2 += sum(s[i, j] * e(h[i], z[j]) for j in same) / sum(e(h[i], h[k]) + e(h[i], z[k]) for k in others)
            total += -math.log(l1 + l2)
    return total / (2 * n)


def naive_stacked_pieces(z0, z1, h0, h1, s0, s1, clusters, tau):
    """The reference code's per-anchor pieces (docs/methods/aecl.md), as loops over the 2N stacked anchors:
    num[r] and den[r] of the two-view ratio on [Z⁰; Z¹], and soft1[v][r], the guided ratio on
    [Z^v; H^v] (S-weighted same-cluster positives, stacked diagonal weight 0, + 1e-5)."""
    n = len(z0)

    def e(a, b):
        return math.exp(cos(a, b) / tau)

    def partner(r):
        return r + n if r < n else r - n

    zs = list(z0) + list(z1)
    num = [e(zs[r], zs[partner(r)]) for r in range(2 * n)]
    den = [sum(e(zs[r], zs[c]) for c in range(2 * n) if c not in (r, partner(r))) for r in range(2 * n)]
    soft1 = []
    for zv, h, s in ((z0, h0, s0), (z1, h1, s1)):
        x = list(zv) + list(h)
        ratios = []
        for r in range(2 * n):
            positive = 0.0
            for c in range(2 * n):
                if clusters[r % n] == clusters[c % n]:
                    weight = (0.0 if r == c else float(s[r % n, c % n])) + 1e-5
                    positive += weight * e(x[r], x[c])
            ratios.append(positive / sum(e(x[r], x[c]) for c in range(2 * n) if c not in (r, partner(r))))
        soft1.append(ratios)
    return num, den, soft1


def naive_reference_li(*args):
    """What the reference train.py optimises: soft0[i, j] = num_i / den_j (2N × 2N), soft1 broadcast
    along the last axis, L_v = -mean over all 4N² (i, j) of log(soft1[j] + soft0[i, j])."""
    num, den, soft1 = naive_stacked_pieces(*args)
    m = len(num)
    losses = []
    for v in (0, 1):
        total = 0.0
        for i in range(m):
            for j in range(m):
                soft0_ij = num[i] / den[j]
                total += -math.log(soft1[v][j] + soft0_ij)
        losses.append(total / (m * m))
    return sum(losses) / 2


def naive_rowwise_li(*args):
    """The same pieces added row by row (neither paper nor code)."""
    num, den, soft1 = naive_stacked_pieces(*args)
    m = len(num)
    losses = [sum(-math.log(num[r] / den[r] + soft1[v][r]) for r in range(m)) / m for v in (0, 1)]
    return sum(losses) / 2


NAIVE_LI = {"paper": naive_paper_li, "reference": naive_reference_li, "rowwise": naive_rowwise_li}


@pytest.mark.parametrize("tau", [1.0, 0.5])
@pytest.mark.parametrize("form", ["paper", "reference", "rowwise"])
def test_similarity_guided_loss_matches_loops(tau, form):
    args = batch()
    naive = NAIVE_LI[form](*args, tau)
    assert similarity_guided_loss(*args, temperature=tau, form=form).item() == pytest.approx(naive, rel=1e-9, abs=1e-6)


def test_no_ic_ablation_keeps_only_the_two_view_term():
    """AECL Table 3 "No IC": eq 7 removed, L_I = -(1/2N) Σ_i Σ_v log l1_i with l1 from eq 6 (a loop)."""
    z0, z1, h0, h1, s0, s1, clusters = batch()
    tau, n = 0.5, len(z0)
    total = sum(-2 * math.log(naive_two_view_ratio(z0, z1, i, tau)) for i in range(n))
    args = (z0, z1, h0, h1, s0, s1, clusters)
    got = similarity_guided_loss(*args, temperature=tau, guided=False)
    assert got.item() == pytest.approx(total / (2 * n), rel=1e-9)
    # the attention and the consistent representations no longer matter
    other = similarity_guided_loss(z0, z1, h1, h0, s1, s0, torch.zeros(n, dtype=torch.long), tau, guided=False)
    assert other.item() == pytest.approx(got.item(), rel=1e-12)
    assert got.item() != pytest.approx(similarity_guided_loss(*args, temperature=tau).item(), rel=1e-3)
    # the code's stacked form without soft1: -mean log(num_i / den_j) over the broadcast matrix
    num, den, _ = naive_stacked_pieces(*args, tau)
    expected = -sum(math.log(num[i] / den[j]) for i in range(2 * n) for j in range(2 * n)) / (4 * n * n)
    assert similarity_guided_loss(*args, temperature=tau, form="reference", guided=False).item() == pytest.approx(
        expected, rel=1e-9)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_reference_broadcast_matches_loops_on_random_batches(seed):
    """Random batch sizes and cluster layouts, float32 as in training, to 1e-6."""
    g = torch.Generator().manual_seed(seed)
    n = int(torch.randint(3, 8, (1,), generator=g))
    z0, z1, h0, h1 = (torch.randn(n, 6, generator=g) for _ in range(4))
    s0, s1 = (torch.softmax(torch.randn(n, n, generator=g), dim=1) for _ in range(2))
    clusters = torch.randint(0, 3, (n,), generator=g)
    args = (z0, z1, h0, h1, s0, s1, clusters)
    naive = naive_reference_li(*(t.double() for t in args[:6]), clusters, 0.5)
    assert similarity_guided_loss(*args, temperature=0.5, form="reference").item() == pytest.approx(naive, abs=1e-6)


def test_the_three_forms_differ():
    args = batch()
    values = {form: similarity_guided_loss(*args, form=form).item() for form in NAIVE_LI}
    assert abs(values["paper"] - values["reference"]) > 1e-3
    assert abs(values["reference"] - values["rowwise"]) > 1e-3
    assert abs(values["paper"] - values["rowwise"]) > 1e-3


@pytest.mark.parametrize("form", ["paper", "reference", "rowwise"])
def test_similarity_guided_loss_gradients_are_finite_even_with_zero_attention(form):
    z0, z1, h0, h1, s0, s1, clusters = batch()
    s0 = torch.eye(5, dtype=torch.float64)  # exact zeros off the diagonal
    tensors = [t.clone().requires_grad_(True) for t in (z0, z1, h0, h1, s0, s1)]
    loss = similarity_guided_loss(*tensors, clusters, temperature=0.05, form=form)
    loss.backward()
    assert torch.isfinite(loss)
    for t in tensors:
        assert t.grad is not None and torch.isfinite(t.grad).all()
    # S receives gradient: L_I trains the attention network
    assert tensors[5].grad.abs().sum() > 0


def test_similarity_guided_loss_rejects_single_sample_and_bad_shapes():
    z0, z1, h0, h1, s0, s1, clusters = batch()
    with pytest.raises(ValueError, match="at least 2"):
        similarity_guided_loss(z0[:1], z1[:1], h0[:1], h1[:1], s0[:1, :1], s1[:1, :1], clusters[:1])
    with pytest.raises(ValueError, match="clusters has 4 rows"):
        similarity_guided_loss(z0, z1, h0, h1, s0, s1, clusters[:4])
    with pytest.raises(ValueError, match="rowwise"):
        similarity_guided_loss(z0, z1, h0, h1, s0, s1, clusters, form="code")


def naive_cluster_loss(p0, p1, tau, positive_in_denominator):
    m = p0.shape[1]
    cols = [p0[:, k] for k in range(m)] + [p1[:, k] for k in range(m)]
    total = 0.0
    for r in range(2 * m):
        partner = r + m if r < m else r - m
        negatives = sum(math.exp(cos(cols[r], cols[c]) / tau) for c in range(2 * m) if c not in (r, partner))
        positive = math.exp(cos(cols[r], cols[partner]) / tau)
        total += -math.log(positive / (negatives + (positive if positive_in_denominator else 0.0)))
    return total / (2 * m)


@pytest.mark.parametrize("reference", [False, True])
def test_cluster_contrastive_loss_matches_loop(reference):
    g = torch.Generator().manual_seed(1)
    p0 = torch.softmax(torch.randn(6, 3, generator=g, dtype=torch.float64), dim=1)
    p1 = torch.softmax(torch.randn(6, 3, generator=g, dtype=torch.float64), dim=1)
    expected = naive_cluster_loss(p0, p1, 0.5, positive_in_denominator=reference)
    assert cluster_contrastive_loss(p0, p1, 0.5, reference=reference).item() == pytest.approx(expected, rel=1e-9)


def test_cluster_contrastive_loss_hand_values_and_reference_is_nt_xent():
    p = torch.eye(2, dtype=torch.float64)  # columns are orthogonal one-hots; views agree
    # paper: -log(e^{1/τ} / (e^0 + e^0)) per anchor; reference: -log(e^{1/τ} / (e^{1/τ} + 2))
    assert cluster_contrastive_loss(p, p, 0.5).item() == pytest.approx(math.log(2) - 2.0)
    assert cluster_contrastive_loss(p, p, 0.5, reference=True).item() == pytest.approx(math.log(1 + 2 * math.exp(-2.0)))
    g = torch.Generator().manual_seed(2)
    p0, p1 = (torch.softmax(torch.randn(5, 4, generator=g), dim=1) for _ in range(2))
    assert torch.equal(cluster_contrastive_loss(p0, p1, 1.0, reference=True), nt_xent(p0.T, p1.T, 1.0))


def test_cluster_contrastive_loss_gradients_are_finite():
    logits = torch.randn(8, 4, requires_grad=True)
    p = torch.softmax(logits, dim=1)
    loss = cluster_contrastive_loss(p, torch.softmax(logits * 2, dim=1), 0.5)
    loss.backward()
    assert torch.isfinite(logits.grad).all() and logits.grad.abs().sum() > 0


def test_pseudo_label_loss_hand_values():
    logits = torch.zeros(4, 4, requires_grad=True)  # uniform p¹: every labelled sample costs log 4
    labels = torch.tensor([0, -1, 2, -1])
    assert pseudo_label_loss(logits, labels).item() == pytest.approx(math.log(4))
    assert pseudo_label_loss(logits, labels, "batch").item() == pytest.approx(math.log(4) / 2)
    logits2 = torch.tensor([[2.0, 0.0], [0.0, 1.0], [5.0, 5.0]])
    expected = (-math.log(math.exp(2) / (math.exp(2) + 1)) - math.log(1 / (1 + math.e))) / 2
    assert pseudo_label_loss(logits2, torch.tensor([0, 0, -1])).item() == pytest.approx(expected)


def test_pseudo_label_loss_is_zero_without_labels_and_has_finite_gradient():
    logits = torch.randn(3, 4, requires_grad=True)
    loss = pseudo_label_loss(logits, torch.full((3,), -1))
    loss.backward()
    assert loss.item() == 0.0 and torch.equal(logits.grad, torch.zeros(3, 4))
    logits = torch.randn(3, 4, requires_grad=True)
    pseudo_label_loss(logits, torch.tensor([1, -1, 3])).backward()
    assert torch.isfinite(logits.grad).all() and logits.grad[1].abs().sum() == 0


def test_pseudo_label_loss_rejects_out_of_range_labels():
    with pytest.raises(ValueError, match="0..3"):
        pseudo_label_loss(torch.zeros(2, 4), torch.tensor([0, 4]))
    with pytest.raises(ValueError, match="reduction"):
        pseudo_label_loss(torch.zeros(2, 4), torch.tensor([0, 1]), "sum")


def test_entropies_hand_values_and_signs():
    m = 4
    uniform = torch.full((3, m), 1.0 / m)
    one_hot = torch.eye(m)[[0, 0, 0]]  # all samples in cluster 0
    assert row_entropy(uniform).item() == pytest.approx(math.log(m))
    assert row_entropy(one_hot).item() == pytest.approx(0.0, abs=1e-9)
    assert row_entropy_term(uniform).item() == pytest.approx(-math.log(m))  # added to the loss: maximises entropy
    assert marginal_entropy(one_hot).item() == pytest.approx(0.0, abs=1e-9)
    assert marginal_entropy(torch.eye(m)).item() == pytest.approx(math.log(m))  # one sample per cluster
    assert marginal_entropy_term(one_hot, uniform).item() == pytest.approx(-math.log(m) / 2)
    assert marginal_entropy_term(one_hot, uniform, "reference").item() == pytest.approx(math.log(m))
    with pytest.raises(ValueError, match="form"):
        marginal_entropy_term(one_hot, uniform, "other")


def test_entropy_terms_decrease_when_assignments_spread():
    """A gradient step on the terms moves P towards higher entropy (the sign docs/methods/aecl.md asks for)."""
    logits = torch.tensor([[3.0, 0.0, 0.0], [2.5, 0.5, 0.0], [3.0, 0.2, 0.1]], requires_grad=True)
    terms = (row_entropy_term, lambda p: marginal_entropy_term(p, p),
             lambda p: marginal_entropy_term(p, p, "reference"))
    for term in terms:
        p = torch.softmax(logits, dim=1)
        before_row, before_marginal = row_entropy(p).item(), marginal_entropy(p).item()
        (grad,) = torch.autograd.grad(term(p), logits)
        assert torch.isfinite(grad).all()
        p_after = torch.softmax(logits - 0.1 * grad, dim=1)
        assert row_entropy(p_after).item() > before_row or marginal_entropy(p_after).item() > before_marginal
