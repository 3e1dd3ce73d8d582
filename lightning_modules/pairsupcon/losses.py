"""PairSupCon losses (Zhang et al., EMNLP 2021; docs/methods/pairsupcon.md) as pure functions on tensors.

- :func:`pair_features` and :func:`pair_classification_loss`: the entailment/contradiction
  classifier of eq (4), a bias-free linear map of ``[u1, u2, |u1 - u2|]``.
- :func:`instance_discrimination_loss`: eq (1)-(3), each of the 2M sentences of a batch of M
  pairs is an anchor, its partner the positive and the other 2M-2 sentences the negatives; only
  anchors from entailment pairs contribute. Three weightings of the negatives (``WEIGHTINGS``):

  ``orig``     plain InfoNCE, eq (1):
               l = -log(e^{s+/τ} / (e^{s+/τ} + Σ_j e^{s_j/τ}))
  ``hardneg``  the authors' reference code: each negative's exponential is weighted by its
               relative importance w_j = e^{s_j/τ} / mean_k e^{s_k/τ} (mean over the anchor's
               2M-2 negatives), l = -log(e^{s+/τ} / (e^{s+/τ} + Σ_j w_j e^{s_j/τ})).
               The weights are not detached, as in the reference code.
  ``paper``    eq (3) read literally, the weight multiplying the similarity inside the exponent:
               l = log(1 + Σ_j exp((α_j s_j - s+) / τ)), α_j = e^{s_j/τ} / mean_k e^{s_k/τ}.
               (Not the same function as ``hardneg``: there the weight multiplies e^{s_j/τ}.)

  Here s+ = cos(z_a, z_positive) and s_j = cos(z_a, z_j). Every form is computed in log space
  (logsumexp / softplus), so τ = 0.05 with cosines near 1 does not overflow.

Normalisation: the mean over the 2P anchors of the P entailment pairs (both directions), as the
reference code does. Eq (2) divides the sum over both directions by P instead, which is twice
this value (the same as doubling β).
"""

from __future__ import annotations

import math
from typing import Callable

import torch
import torch.nn.functional as F

from lightning_modules.shared.distributed import ddp_loss_scale, gather_with_grad

WEIGHTINGS = ("hardneg", "orig", "paper")


def pair_features(u1: torch.Tensor, u2: torch.Tensor) -> torch.Tensor:
    """[u1, u2, |u1 - u2|] for the pair classifier (PairSupCon eq 4, SBERT's features).

    Args:
        u1, u2: [M, d] sentence embeddings of the premises and hypotheses.
    Returns: [M, 3d].
    """
    return torch.cat([u1, u2, (u1 - u2).abs()], dim=1)  # [M, 3d]


def pair_classification_loss(
    u1: torch.Tensor, u2: torch.Tensor, labels: torch.Tensor, weight: torch.Tensor
) -> torch.Tensor:
    """Cross-entropy of the pair classifier over all M pairs (PairSupCon eq 4, docs/methods/pairsupcon.md).

    Args:
        u1, u2: [M, d] sentence embeddings (mean pooling) of the two sides of each pair.
        labels: [M] integers, 1 = entailment, 0 = contradiction.
        weight: [C, 3d] weight of the bias-free linear classifier f (C = 2).
    Returns: the mean cross-entropy (scalar).
    """
    logits = pair_features(u1, u2) @ weight.T  # [M, C]
    return F.cross_entropy(logits, labels.long())


def _log_negative_mass(neg: torch.Tensor, weighting: str) -> torch.Tensor:
    """log of the negatives' term in the denominator, from scaled similarities s_j/τ.

    Args:
        neg: [A, K] s_j/τ for each anchor's K = 2M-2 negatives.
    Returns: [A].
    """
    k = neg.shape[1]
    plain = torch.logsumexp(neg, dim=1)  # [A] log Σ e^{s_j/τ}
    if weighting == "orig":
        return plain
    # Σ_j w_j e^{s_j/τ} = K · Σ_j e^{2 s_j/τ} / Σ_k e^{s_k/τ}
    return math.log(k) + torch.logsumexp(2.0 * neg, dim=1) - plain  # [A]


def instance_discrimination_loss(
    z1: torch.Tensor,
    z2: torch.Tensor,
    entailment: torch.Tensor,
    temperature: float = 0.05,
    weighting: str = "hardneg",
) -> torch.Tensor:
    """PairSupCon's instance-discrimination loss on entailment pairs (eq 1-3, docs/methods/pairsupcon.md).

    Args:
        z1, z2: [M, D] head outputs for the two sides of M pairs (normalised here; under DDP
            these are the gathered global batch, see ``distributed.gather_with_grad``).
        entailment: [M] bool (or 0/1) mask, True for entailment pairs, gathered like z1/z2.
            Contradiction pairs still provide negatives, they are just never anchors.
        temperature: τ.
        weighting: one of ``WEIGHTINGS`` (module docstring gives each formula).
    Returns: mean over the 2P anchors belonging to entailment pairs. With no entailment pair
        (or a single pair, hence no negatives) the loss is 0, still attached to the graph.
    """
    if weighting not in WEIGHTINGS:
        raise ValueError(f"weighting must be one of {WEIGHTINGS}, got '{weighting}'")
    if z1.shape != z2.shape or z1.ndim != 2:
        raise ValueError(f"z1 and z2 must both be [M, D], got {tuple(z1.shape)} and {tuple(z2.shape)}")
    m = z1.shape[0]
    if entailment.shape != (m,):
        raise ValueError(f"entailment mask must have shape [{m}], got {tuple(entailment.shape)}")
    z = F.normalize(torch.cat([z1, z2]), dim=1)  # [2M, D]
    cos = z @ z.T  # [2M, 2M]
    anchors = torch.arange(2 * m, device=z.device)  # [2M]
    partner = (anchors + m) % (2 * m)  # [2M]
    positive_cos = cos[anchors, partner]  # [2M]
    is_anchor = torch.cat([entailment, entailment]).bool()  # [2M]
    if m < 2:  # no negatives: log(1 + 0) for every anchor
        return cos.sum() * 0.0
    # each row's columns other than itself and its partner, in column order, as indices: a boolean-mask index
    # would wait for the GPU to count the mask
    low, high = torch.minimum(anchors, partner).unsqueeze(1), torch.maximum(anchors, partner).unsqueeze(1)  # [2M, 1]
    columns = torch.arange(2 * m - 2, device=z.device).expand(2 * m, -1)  # [2M, 2M-2]
    columns = columns + (columns >= low).long()
    columns = columns + (columns >= high).long()
    negative_cos = cos.gather(1, columns)  # [2M, 2M-2]
    if weighting == "paper":
        alpha = (2 * m - 2) * torch.softmax(negative_cos / temperature, dim=1)  # [2M, 2M-2]
        logits = (alpha * negative_cos - positive_cos.unsqueeze(1)) / temperature  # [2M, 2M-2]
        zero = logits.new_zeros(2 * m, 1)
        per_anchor = torch.logsumexp(torch.cat([zero, logits], dim=1), dim=1)  # [2M] log(1 + Σ e^x)
    else:
        log_negatives = _log_negative_mass(negative_cos / temperature, weighting)  # [2M]
        per_anchor = F.softplus(log_negatives - positive_cos / temperature)  # [2M] -log(pos/(pos+neg))
    selected = torch.where(is_anchor, per_anchor, torch.zeros_like(per_anchor))  # [2M]
    return selected.sum() / is_anchor.sum().clamp_min(1)


def pairsupcon_objective(
    u1: torch.Tensor,
    u2: torch.Tensor,
    labels: torch.Tensor,
    classifier_weight: torch.Tensor | None,
    project: Callable[[torch.Tensor], torch.Tensor] | None,
    temperature: float = 0.05,
    weighting: str = "hardneg",
    beta: float = 1.0,
) -> tuple[dict[str, torch.Tensor], torch.Tensor, torch.Tensor]:
    """PairSupCon's objective L = L_C + β·L_ID (eq 5 with batch means) for one process's pairs.

    Args:
        u1, u2: [M, d] pooled embeddings of this process's premises and hypotheses.
        labels: [M] 1 = entailment, 0 = contradiction.
        classifier_weight: [2, 3d] weight of the classifier f, or None to leave L_C out.
        project: the instance-discrimination head h ([M, d] -> [M, 128]), or None to leave L_ID out.
    Returns: (named losses to log, total, loss to back-propagate). Under DDP the head outputs and
    the labels are gathered (rows stay aligned), so the negatives come from the global batch,
    and the back-propagated L_ID is multiplied by ``ddp_loss_scale()``; L_C stays per process,
    DDP's gradient averaging makes it the global mean.
    """
    losses: dict[str, torch.Tensor] = {}
    total = u1.new_zeros(())
    backward = u1.new_zeros(())
    if classifier_weight is not None:
        losses["cls_loss"] = pair_classification_loss(u1, u2, labels, classifier_weight)
        total = total + losses["cls_loss"]
        backward = backward + losses["cls_loss"]
        with torch.no_grad():
            logits = pair_features(u1, u2) @ classifier_weight.T  # [M, 2]
            losses["cls_acc"] = (logits.argmax(1) == labels).float().mean()
    if project is not None:
        z1 = gather_with_grad(project(u1))  # [W*M, D]
        z2 = gather_with_grad(project(u2))  # [W*M, D]
        entailment = gather_with_grad(labels) == 1  # [W*M]
        losses["instance_loss"] = instance_discrimination_loss(z1, z2, entailment, temperature, weighting)
        losses["entailment_share"] = entailment.float().mean()
        total = total + beta * losses["instance_loss"]
        backward = backward + beta * losses["instance_loss"] * ddp_loss_scale()
    return losses, total, backward
