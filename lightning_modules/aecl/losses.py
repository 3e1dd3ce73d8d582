"""AECL's losses as pure functions on tensors (docs/methods/aecl.md; AECL paper §3.2-3.3, eqs 5-13).

Conventions shared by every function here:
- ``z0, z1`` [N, D]: projections Z^(0), Z^(1) of the original text and its augmentation;
  ``h0, h1`` [N, D]: consistent representations H^(v) = S^(v)·T^(v) from the sample-level
  attention; ``s0, s1`` [N, N]: the attention matrices S^(v) (rows sum to 1).
  None of them needs to be normalised: similarities are cosines (eq 8).
- ``p0, p1`` [N, M]: cluster probabilities P^(v) = softmax of the clustering network.
- ``clusters`` [N]: predicted cluster of each sample, argmax of P^(0) (the set Λ_i of eq 7 is
  every j with ``clusters[j] == clusters[i]``, i itself included).
- Every loss is computed on the local batch it is given (no all-gather: see ``aecl.py``).
- The entropy functions return the quantity to ADD to the loss (already signed so that
  minimising it maximises the entropy, as docs/methods/aecl.md explains); multiply by λ3 / λ4.

Ratios are computed in log space (log-sum-exp over positives and negatives), so a small
temperature cannot overflow ``exp``; the values are those of the paper's formulas.
"""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from lightning_modules.shared.contrastive import nt_xent, partner_index

# the reference code adds this to every attention weight before weighting its positives
REFERENCE_S_OFFSET = 1e-5


def _cosine(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """[N, D] x [K, D] -> [N, K] cosine similarities."""
    return F.normalize(a, dim=1) @ F.normalize(b, dim=1).T


def _masked_logsumexp(logits: torch.Tensor, keep: torch.Tensor) -> torch.Tensor:
    """Row-wise log Σ_{keep} exp(logits); masked entries get no gradient."""
    return logits.masked_fill(~keep, float("-inf")).logsumexp(dim=1)


def _check_batch(n: int, **tensors: torch.Tensor) -> None:
    if n < 2:
        raise ValueError(f"AECL's contrastive losses need at least 2 samples in the batch, got {n}")
    for name, tensor in tensors.items():
        if tensor.shape[0] != n:
            raise ValueError(f"{name} has {tensor.shape[0]} rows but the batch has {n} samples")


# L_I forms: the paper's (default), what the reference code's train.py optimises (a 2N x 2N
# broadcast of the two-view ratio), and the row-by-row sum of the same ratios (neither paper nor
# code: what this project computed before the broadcast was noticed; kept for comparison)
INSTANCE_LOSS_FORMS = ("paper", "reference", "rowwise")


def similarity_guided_loss(
    z0: torch.Tensor,
    z1: torch.Tensor,
    h0: torch.Tensor,
    h1: torch.Tensor,
    s0: torch.Tensor,
    s1: torch.Tensor,
    clusters: torch.Tensor,
    temperature: float = 1.0,
    form: str = "paper",
    guided: bool = True,
) -> torch.Tensor:
    """Similarity-guided contrastive loss L_I (AECL eqs 6, 7, 9; docs/methods/aecl.md). Scalar.

    ``form="paper"`` (default), with e(a, b) = exp(cos(a, b) / τ), for each sample i:

      l1_i = e(z⁰_i, z¹_i) / Σ_{k≠i}[e(z⁰_i, z⁰_k) + e(z⁰_i, z¹_k)]
           + e(z¹_i, z⁰_i) / Σ_{k≠i}[e(z¹_i, z¹_k) + e(z¹_i, z⁰_k)]                      (eq 6)
      l2_i^v = Σ_{j∈Λ_i} S^v_ij e(z^v_i, h^v_j) / Σ_{k≠i}[e(z^v_i, z^v_k) + e(z^v_i, h^v_k)]
             + Σ_{j∈Λ_i} S^v_ij e(h^v_i, z^v_j) / Σ_{k≠i}[e(h^v_i, h^v_k) + e(h^v_i, z^v_k)]   (eq 7)
      L_I = -(1/2N) Σ_i Σ_{v∈{0,1}} log(l1_i + l2_i^v)                                    (eq 9)

    Normalisation: each of the four ratios has its own denominator of 2N-2 negatives (the
    anchor itself and its own counterpart — z¹_i for z⁰_i, h^v_i for z^v_i — are excluded),
    while the numerator of l2 sums over all of Λ_i, j = i included. The l1 term enters both
    views' logs; the sum over i and v has 2N terms, hence the 1/2N (a mean). Because l1 + l2
    can exceed 1 the loss can be negative. S keeps its gradient: L_I also trains the attention.

    ``form="reference"`` (what the reference ``train.py`` optimises) and ``form="rowwise"`` (its pieces added row by
    row, kept to compare with earlier runs): :func:`_similarity_guided_stacked`.

    Args:
        z0, z1, h0, h1: [N, D]; s0, s1: [N, N]; clusters: [N] integer cluster ids.
        temperature: τ_I (paper 1.0, reference code 0.5).
        form: ``paper`` | ``reference`` | ``rowwise`` (see above).
        guided: False drops the similarity-guided term (eq 7: l2 in the paper form, soft1 in the code's):
            the "No IC" ablation of AECL Table 3, where only the two-view term l1 (eq 6) is left.
    """
    if form not in INSTANCE_LOSS_FORMS:
        raise ValueError(f"the instance-loss form must be one of {INSTANCE_LOSS_FORMS}, got '{form}'")
    n = z0.shape[0]
    _check_batch(n, z1=z1, h0=h0, h1=h1, s0=s0, s1=s1, clusters=clusters)
    if temperature <= 0:
        raise ValueError(f"temperature must be positive, got {temperature}")
    same = clusters.view(-1, 1) == clusters.view(1, -1)  # [N, N] j ∈ Λ_i
    if form != "paper":
        return _similarity_guided_stacked(z0, z1, (h0, h1), (s0, s1), same, temperature,
                                          broadcast=form == "reference", guided=guided)

    off = ~torch.eye(n, dtype=torch.bool, device=z0.device)  # [N, N] k ≠ i
    off2 = torch.cat([off, off], dim=1)  # [N, 2N]
    zz01 = _cosine(z0, z1) / temperature  # [N, N]
    positive = zz01.diagonal()  # [N] cos(z⁰_i, z¹_i)/τ
    log_l1_a = positive - _masked_logsumexp(torch.cat([_cosine(z0, z0) / temperature, zz01], dim=1), off2)  # [N]
    log_l1_b = positive - _masked_logsumexp(torch.cat([_cosine(z1, z1) / temperature, zz01.T], dim=1), off2)  # [N]

    if not guided:  # No IC: -(1/2N) Σ_i Σ_v log l1_i, the same l1 in both views' logs
        return -torch.stack([log_l1_a, log_l1_b]).logsumexp(dim=0).mean()
    per_view = []
    for z, h, s in ((z0, h0, s0), (z1, h1, s1)):
        zz = _cosine(z, z) / temperature  # [N, N]
        zh = _cosine(z, h) / temperature  # [N, N] zh[i, j] = cos(z_i, h_j)/τ
        hh = _cosine(h, h) / temperature  # [N, N]
        log_s = torch.log(s.clamp_min(torch.finfo(s.dtype).tiny))  # [N, N]
        log_l2_a = _masked_logsumexp(zh + log_s, same) - _masked_logsumexp(torch.cat([zz, zh], dim=1), off2)  # [N]
        log_l2_b = _masked_logsumexp(zh.T + log_s, same) - _masked_logsumexp(torch.cat([hh, zh.T], dim=1), off2)  # [N]
        # log(l1_i + l2_i^v) = log Σ of the four ratios
        per_view.append(torch.stack([log_l1_a, log_l1_b, log_l2_a, log_l2_b]).logsumexp(dim=0))  # [N]
    return -torch.cat(per_view).mean()


def _stacked_ratio_masks(n: int, device) -> tuple[torch.Tensor, torch.Tensor]:
    """For 2N stacked rows: the counterpart index r ± N [2N], and the 2N-2 negatives mask [2N, 2N]."""
    counterpart = partner_index(n, device)  # [2N]
    negatives = ~torch.eye(2 * n, dtype=torch.bool, device=device)  # [2N, 2N]
    negatives[torch.arange(2 * n, device=device), counterpart] = False
    return counterpart, negatives


def _similarity_guided_stacked(z0, z1, hs, ss, same, temperature, broadcast: bool, guided: bool = True) -> torch.Tensor:
    """The reference code's stacked-matrix L_I: ``broadcast`` True = its train.py, False = row by row;
    ``guided`` False leaves out soft1 (No IC).

    The reference code's pieces (docs/methods/aecl.md), for the 2N anchors r of a stacked matrix (partner
    of r = r ± N):
      two-view: X = [Z⁰; Z¹];  num_r = e(X_r, X_partner(r)),
                den_r = Σ over the 2N-2 columns other than r and partner(r);
      guided (per view v): Y = [Z^v; H^v];
                soft1_r = Σ_c W_rc · e(Y_r, Y_c) over c with the same predicted cluster
                          / Σ over the 2N-2 columns of Y other than r and partner(r),
                W = (S^v tiled 2x2 with the stacked diagonal set to 0) + 1e-5,
      so same-view z–z (and h–h) pairs of one cluster also count as S-weighted positives.

    ``broadcast`` (``form="reference"``): what the reference ``train.py`` optimises. Its two-view ratio is a
    column [2N, 1] of numerators over a row [2N] of denominators, soft0[i, j] = num_i / den_j,
    a 2N×2N matrix; soft1 [2N] is broadcast along the last axis:
      L_v = -(1/4N²) Σ_{i,j} log(soft1_j + soft0[i, j]);   L_I = (L_0 + L_1) / 2.

    Row by row (``form="rowwise"``): the same pieces added up for each row, L_v = -mean_r log(num_r/den_r + soft1_r).
    Neither the paper nor the code computes this; it is kept to compare with earlier runs.
    """
    n = z0.shape[0]
    counterpart, negatives = _stacked_ratio_masks(n, z0.device)
    rows = torch.arange(2 * n, device=z0.device)
    z = torch.cat([z0, z1])  # [2N, D]
    sim = _cosine(z, z) / temperature  # [2N, 2N]
    log_num = sim[rows, counterpart]  # [2N] log num_r
    log_den = _masked_logsumexp(sim, negatives)  # [2N] log den_r
    if broadcast:
        log_soft0 = log_num.unsqueeze(1) - log_den.unsqueeze(0)  # [2N, 2N] log(num_i / den_j)
    else:
        log_soft0 = log_num - log_den  # [2N] log(num_r / den_r)
    if not guided:
        return -log_soft0.mean()
    same2 = same.repeat(2, 2)  # [2N, 2N]
    eye2 = torch.eye(2 * n, dtype=torch.bool, device=z0.device)
    losses = []
    for zv, h, s in zip((z0, z1), hs, ss):
        x = torch.cat([zv, h])  # [2N, D]
        sim = _cosine(x, x) / temperature  # [2N, 2N]
        weight = s.repeat(2, 2).masked_fill(eye2, 0.0) + REFERENCE_S_OFFSET  # [2N, 2N]
        log_soft1 = _masked_logsumexp(sim + torch.log(weight), same2) - _masked_logsumexp(sim, negatives)  # [2N]
        # broadcast: soft1 [2N] against the last axis of soft0 [2N, 2N], as the code's tensors do
        losses.append(-torch.logaddexp(log_soft1, log_soft0).mean())
    return (losses[0] + losses[1]) / 2


def cluster_contrastive_loss(
    p0: torch.Tensor, p1: torch.Tensor, temperature: float = 0.5, reference: bool = False
) -> torch.Tensor:
    """Cluster-level contrastive loss L_C (AECL eqs 10, 11; docs/methods/aecl.md). Scalar.

    The M columns of P⁰ and P¹ are cluster representations; column k of one view is the
    positive of column k of the other, the other 2M-2 columns are negatives:
      l_c,k = -log e(P⁰_:k, P¹_:k) / Σ_{j≠k}[e(P⁰_:k, P⁰_:j) + e(P⁰_:k, P¹_:j)]  + (same from P¹),
      L_C = (1/2M) Σ_k l_c,k   (a mean over the 2M anchor columns),
    with e(a, b) = exp(cos(a, b)/τ_C). As eq 10 is written, the positive is NOT in the
    denominator. ``reference=True`` uses the reference code's cross-entropy form, where the
    positive is also in the denominator: exactly ``nt_xent`` on the columns.

    Args:
        p0, p1: [N, M] cluster probabilities of the two views.
        temperature: τ_C (paper 0.5, reference code 1.0).
    """
    if p0.shape != p1.shape:
        raise ValueError(f"p0 and p1 must have the same shape, got {tuple(p0.shape)} and {tuple(p1.shape)}")
    if p0.shape[1] < 2:
        raise ValueError("the cluster-level loss needs at least 2 clusters")
    if temperature <= 0:
        raise ValueError(f"temperature must be positive, got {temperature}")
    if reference:
        return nt_xent(p0.T, p1.T, temperature)
    m = p0.shape[1]
    columns = torch.cat([p0.T, p1.T])  # [2M, N]
    sim = _cosine(columns, columns) / temperature  # [2M, 2M]
    counterpart, negatives = _stacked_ratio_masks(m, p0.device)
    rows = torch.arange(2 * m, device=p0.device)
    return -(sim[rows, counterpart] - _masked_logsumexp(sim, negatives)).mean()


def pseudo_label_loss(logits1: torch.Tensor, pseudo_labels: torch.Tensor, reduction: str = "labelled") -> torch.Tensor:
    """Pseudo-label loss L_P (AECL eq 12; docs/methods/aecl.md): cross-entropy of the augmented view. Scalar.

    Args:
        logits1: [N, M] clustering-network logits of the augmented view (p¹ = softmax).
        pseudo_labels: [N] cluster ids in 0..M-1, or -1 for "no pseudo-label" (stage 3 keeps
            only samples with max p⁰ above the confidence threshold).
        reduction: ``labelled`` (default) averages over the labelled samples only;
            ``batch`` divides the labelled samples' sum by N, as the reference code does in
            stage 3 (confident rows weighted 1, the others 0, then a batch mean).

    Returns 0 (with a graph, zero gradient) when no sample has a pseudo-label.
    """
    if reduction not in ("labelled", "batch"):
        raise ValueError(f"reduction must be 'labelled' or 'batch', got '{reduction}'")
    if pseudo_labels.shape != logits1.shape[:1]:
        raise ValueError(f"pseudo_labels must have shape [{logits1.shape[0]}], got {tuple(pseudo_labels.shape)}")
    m = logits1.shape[1]
    # checked on the device (a Python `if` would wait for the GPU every step); the CPU raises at once, a GPU
    # reports a device-side assertion at its next synchronisation
    try:
        torch._assert_async(((pseudo_labels >= -1) & (pseudo_labels < m)).all(), "pseudo-labels out of range")
    except RuntimeError as err:
        found = pseudo_labels.unique().tolist()
        raise ValueError(f"pseudo-labels must be -1 (none) or in 0..{m - 1}, got values {found}") from err
    labelled = pseudo_labels >= 0  # [N]
    # every row's cross-entropy, unlabelled rows weighted 0: no boolean index (its size would be read back);
    # the leading +0.0 avoids logging -0.0 when no row is labelled
    per_row = F.cross_entropy(logits1, pseudo_labels.clamp_min(0), reduction="none")  # [N]
    total = logits1.new_zeros(()) + torch.where(labelled, per_row, torch.zeros_like(per_row)).sum()
    # N made on the device: torch.tensor(N, device=...) would be a host-to-device copy, which waits for the GPU
    count = labelled.sum() if reduction == "labelled" else logits1.new_full((), float(logits1.shape[0]))
    return total / count.clamp_min(1)


def row_entropy(p: torch.Tensor, eps: float = 1e-12) -> torch.Tensor:
    """Mean entropy of the rows of P: -(1/N) Σ_i Σ_j P_ij log P_ij (AECL eq 5's L_E1). Scalar ≥ 0."""
    return -(p * torch.log(p.clamp_min(eps))).sum(dim=1).mean()


def marginal_entropy(p: torch.Tensor, eps: float = 1e-12) -> torch.Tensor:
    """Entropy of the mean assignment q = (1/N) Σ_i p_i (one view of AECL eq 13). Scalar in [0, log M]."""
    q = p.mean(dim=0)  # [M]
    return -(q * torch.log(q.clamp_min(eps))).sum()


def row_entropy_term(p0: torch.Tensor) -> torch.Tensor:
    """The quantity to add to the loss (times λ3) for eq 5: -L_E1 = -row_entropy(P⁰).

    The paper adds L_E1 to keep the rows of P⁰ from turning one-hot too early, which needs
    the entropy MAXIMISED (docs/methods/aecl.md); the reference code likewise subtracts 0.01·H_row.
    Args: p0 [N, M] cluster probabilities of the original text.
    """
    return -row_entropy(p0)


def marginal_entropy_term(p0: torch.Tensor, p1: torch.Tensor, form: str = "paper") -> torch.Tensor:
    """The quantity to add to the loss (times λ4) for eq 13; minimising it MAXIMISES the
    entropy of the mean assignments q⁰, q¹, which keeps all samples from collapsing into one
    cluster (docs/methods/aecl.md).

    - ``paper``: -L_E2 = -(H(q⁰) + H(q¹)) / 2 (eq 13 with its 1/2, sign for maximisation).
    - ``reference``: Σ_v (log M - H(q^v)) ≥ 0, the reference code's form: summed over the
      two views, so for the same λ4 its gradient is twice the paper form's.

    Args: p0, p1 [N, M] cluster probabilities of the two views.
    """
    if form == "paper":
        return -(marginal_entropy(p0) + marginal_entropy(p1)) / 2
    if form == "reference":
        log_m = math.log(p0.shape[1])
        return (log_m - marginal_entropy(p0)) + (log_m - marginal_entropy(p1))
    raise ValueError(f"form must be 'paper' or 'reference', got '{form}'")
