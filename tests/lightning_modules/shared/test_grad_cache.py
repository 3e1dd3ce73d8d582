"""Cached gradients (textcore/encoding/grad_cache.py): one training step with the encoder run in
mini-batches and replayed in backward gives the loss and every parameter gradient of the uncached step,
for every method, with dropout off and on; state a step changes (ClusterNS centroids) changes once."""
from __future__ import annotations

import copy

import pytest
import torch
from torch import nn

from tests.lightning_modules.shared.test_chunked_encoder import METHODS, TEXTS, gradient_difference
from textcore.encoding.grad_cache import cached_encoding


# -- the autograd function alone ---------------------------------------------------------------------------
def test_function_matches_one_graph_with_dropout_and_replays_the_masks():
    """A small net with dropout: the cached output equals the direct one under the same seed, the gradient of
    a loss over the whole batch equals the direct gradient, and the replay leaves the run's RNG untouched."""
    net = nn.Sequential(nn.Linear(6, 8), nn.Dropout(0.5), nn.Tanh(), nn.Linear(8, 3)).train()
    x = torch.randn(10, 6, generator=torch.Generator().manual_seed(0))
    rows = [torch.tensor([3, 0, 7]), torch.tensor([1, 2, 9, 4]), torch.tensor([5, 6, 8])]
    params = list(net.parameters())

    def loss_of(z):  # a loss that couples all rows, like an in-batch contrastive loss
        return torch.logsumexp(z @ z.T, dim=1).mean()

    torch.manual_seed(1)
    direct = torch.cat([net(x[r]) for r in rows])  # the same chunks, the same RNG order
    order = torch.cat(rows)
    direct = direct[torch.argsort(order)]
    loss_of(direct).backward()
    expected = [p.grad.clone() for p in params]
    after_direct = torch.rand(1)
    net.zero_grad()

    torch.manual_seed(1)
    cached = cached_encoding([lambda r=r: net(x[r]) for r in rows], rows, params, torch.device("cpu"))
    assert torch.equal(cached, direct.detach())
    loss_of(cached).backward()
    assert torch.equal(torch.rand(1), after_direct)  # backward's replay ran inside fork_rng
    for p, e in zip(params, expected):
        assert torch.allclose(p.grad, e, atol=1e-6)


# -- every method ------------------------------------------------------------------------------------------
def dropout(module: nn.Module, p: float) -> None:
    for m in module.modules():
        if isinstance(m, nn.Dropout):
            m.p = p


def step(module, batch, grad_cache_tokens: int, seed: int = 0):
    """Loss and gradients of one training step from ``module``'s state (a copy is trained)."""
    module = copy.deepcopy(module)
    module.encoder.grad_cache_tokens = grad_cache_tokens
    module.zero_grad()
    torch.manual_seed(seed)
    loss = module.training_step(batch, 0)
    loss.backward()
    grads = {n: p.grad.clone() for n, p in module.named_parameters() if p.grad is not None}
    return loss.detach(), grads, module


def prepared(method: str):
    torch.manual_seed(0)
    module, batch = METHODS[method]()
    module.log = lambda *args, **kwargs: None
    module.train()
    module.encoder.chunk_tokens = 24  # the uncached step is chunked too: the same mini-batches
    if method == "clusterns":  # clustering active: started on a first step, then the compared step
        module.kmean_cosine = 1.0
        dropout(module, 0.0)
        module.training_step(batch, 0)
        assert bool(module.clustering_started)
    if method == "aecl":  # a stage-3 step: every loss term, pseudo-labels from the head
        module.set_stage(3)
    return module, batch


@pytest.mark.parametrize("method", sorted(METHODS))
def test_cached_step_equals_uncached_with_dropout_off(method):
    module, batch = prepared(method)
    module.double()
    dropout(module, 0.0)
    loss, grads, plain = step(module, batch, 0)
    cached_loss, cached_grads, cached = step(module, batch, 24)
    assert len(grads) > 5 and cached_grads.keys() == grads.keys()
    assert abs(float(cached_loss - loss)) < 1e-10
    assert gradient_difference(grads, cached_grads) < 1e-8
    if method == "clusterns":  # the centroids moved once, the same way
        assert torch.equal(plain.centroids, cached.centroids)
        assert not torch.equal(plain.centroids, module.centroids)


@pytest.mark.parametrize("method", sorted(METHODS))
def test_cached_step_equals_uncached_with_dropout_on(method):
    """The same seed gives the same masks in both paths (the mini-batches run in the same order, and the
    replay restores each one's RNG state), so the same loss and gradients up to float rounding."""
    module, batch = prepared(method)
    dropout(module, 0.1)
    loss, grads, _ = step(module, batch, 0, seed=3)
    cached_loss, cached_grads, _ = step(module, batch, 24, seed=3)
    assert abs(float(cached_loss - loss)) < 1e-5
    assert gradient_difference(grads, cached_grads) < 1e-4
    other_loss, _, _ = step(module, batch, 24, seed=4)
    assert abs(float(other_loss - loss)) > 1e-6  # dropout is on: another seed is another step


def test_mini_batches_respect_the_token_budget():
    module, batch = prepared("simcse")
    seen = []
    original = module.encoder._pooled

    def spy(input_ids, attention_mask, *args, **kwargs):
        seen.append(tuple(input_ids.shape))
        return original(input_ids, attention_mask, *args, **kwargs)

    module.encoder._pooled = spy
    module.encoder.grad_cache_tokens = 24
    module.training_step(batch, 0).backward()
    assert len(seen) >= 4 and len(seen) % 2 == 0  # every mini-batch once in forward, once in backward
    assert all(rows * width <= 24 or rows == 1 for rows, width in seen)
    assert seen[: len(seen) // 2] == seen[len(seen) // 2:]  # the replay runs the same mini-batches
    assert sum(rows for rows, _ in seen[: len(seen) // 2]) == 2 * len(TEXTS)


# -- two processes (slow tier) -----------------------------------------------------------------------------
class _Step(nn.Module):
    """What Lightning's DDP wrapper does: the training step runs inside DDP's forward."""

    def __init__(self, module):
        super().__init__()
        self.module = module

    def forward(self, batch):
        return self.module.training_step(batch, 0)


def _rows(value, rank: int, world: int):
    if hasattr(value, "items"):  # a dict or the tokenizer's BatchEncoding
        return {k: _rows(v, rank, world) for k, v in value.items()}
    return value[rank::world]


def _ddp_worker(rank: int, world: int, out_dir: str) -> None:
    from torch.nn.parallel import DistributedDataParallel

    for tokens in (0, 24):
        torch.manual_seed(0)
        module, batch = METHODS["simcse"]()
        module.log = lambda *args, **kwargs: None
        module.double().train()
        dropout(module, 0.0)
        module.encoder.chunk_tokens = 24
        module.encoder.grad_cache_tokens = tokens
        model = DistributedDataParallel(_Step(module))
        loss = model(_rows(batch, rank, world))
        loss.backward()
        torch.save({"loss": loss.detach(), "grads": {n: p.grad.clone() for n, p in module.named_parameters()
                                                     if p.grad is not None}}, f"{out_dir}/rank{rank}_{tokens}.pt")


@pytest.mark.slow
def test_two_processes_cached_equals_uncached(tmp_path):
    """Under DDP (gloo, 2 CPU processes) the cached step reduces the same gradients as the uncached one, and
    every parameter is reduced once (DDP would stop on a parameter marked ready twice)."""
    from tests.helpers.ddp import spawn_gloo

    spawn_gloo(_ddp_worker, 2, tmp_path)
    for rank in (0, 1):
        plain = torch.load(tmp_path / f"rank{rank}_0.pt")
        cached = torch.load(tmp_path / f"rank{rank}_24.pt")
        assert abs(float(plain["loss"] - cached["loss"])) < 1e-10
        assert gradient_difference(plain["grads"], cached["grads"]) < 1e-8
    zero, one = torch.load(tmp_path / "rank0_24.pt"), torch.load(tmp_path / "rank1_24.pt")
    assert all(torch.allclose(zero["grads"][n], one["grads"][n]) for n in zero["grads"])  # reduced across ranks
