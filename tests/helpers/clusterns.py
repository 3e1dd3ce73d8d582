"""Naive loops for ClusterNS's clustering and BML, for tests/lightning_modules/{shared,clusterns}/."""
import torch
import torch.nn.functional as F


def cos(a, b) -> float:
    a, b = a.detach(), b.detach()
    return float(torch.dot(a, b) / (a.norm() * b.norm()))


def naive_greedy(sim: torch.Tensor, k: int, first: int) -> list[int]:
    chosen = [first]
    while len(chosen) < k:
        last = chosen[-1]
        best, best_value = None, None
        for j in range(sim.shape[0]):
            if j in chosen:
                continue
            if best_value is None or sim[last, j].item() < best_value:
                best, best_value = j, sim[last, j].item()
        chosen.append(best)
    return chosen


def naive_bml(sim, same, alpha, beta, reduction):
    n = sim.shape[0]
    terms, total = [], 0.0
    for i in range(n):
        for j in range(n):
            member = bool(same[i][j]) and i != j
            delta = (sim[i, j] - sim[i, i]) if member else torch.zeros(())
            term = F.relu(delta + alpha) + F.relu(-delta - beta)
            total = total + term
            if member:
                terms.append(term)
    if reduction == "matrix":
        return total / (n * n)
    return sum(terms) / len(terms)
