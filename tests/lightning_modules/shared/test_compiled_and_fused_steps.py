"""The faster kernels compute what the plain ones do: a ``torch.compile``d backbone, fused Adam, and
autocast with its weight-cast cache on (our precision plugin), each against the plain step on the CPU."""
from __future__ import annotations

import functools

import pytest
import torch

from lightning_modules.sccl.module import SCCL
from lightning_modules.shared.base import build_optimizer
from lightning_modules.shared.precision import CachedCastMixedPrecision, precision_trainer_kwargs

TEXTS_A = ["how do i revert a git commit", "python list comprehension with two loops", "sql join on three tables",
           "why is my css grid not centered", "a", "regex for email addresses in java and kotlin please", "b c"]
TEXTS_B = ["undo last commit", "nested loops in a comprehension", "join three tables", "center a grid",
           "single letter", "email regex", "two letters"]


def sccl(chunk_tokens: int = 24) -> SCCL:
    torch.manual_seed(0)
    module = SCCL(num_clusters=3, backbone="tiny", chunk_tokens=chunk_tokens)
    module.set_centroids(torch.randn(3, module.encoder.dim))
    module.log = lambda *args, **kwargs: None  # no Trainer here
    return module


def batch(module: SCCL, a: list[str], b: list[str]) -> dict:
    from textcore.encoding.token_batches import with_token_counts

    tokens = lambda texts: with_token_counts(module.encoder.tokenize(texts))  # noqa: E731
    return {"index": torch.arange(len(a)), "view1": tokens(a), "view2": tokens(b)}


def loss_and_gradients(module: SCCL, data: dict) -> tuple[float, dict[str, torch.Tensor]]:
    module.zero_grad(set_to_none=True)
    loss = module.training_step(data, 0)
    loss.backward()
    return loss.item(), {n: p.grad.clone() for n, p in module.named_parameters() if p.grad is not None}


@pytest.mark.slow
def test_the_compiled_backbone_gives_the_eager_loss_and_gradients_for_every_shape():
    eager, compiled = sccl(), sccl()
    compiled.encoder.compile_backbone()
    for module in (eager, compiled):
        module.encoder.backbone.eval()  # dropout off: both draw nothing
    # two batches of other widths and chunk plans: dynamic shapes, no recompilation per shape needed
    for a, b in ((TEXTS_A, TEXTS_B), (TEXTS_B[:5], TEXTS_A[:5])):
        loss, grads = loss_and_gradients(eager, batch(eager, a, b))
        loss_c, grads_c = loss_and_gradients(compiled, batch(compiled, a, b))
        assert loss_c == pytest.approx(loss, rel=1e-5)
        assert grads.keys() == grads_c.keys()
        for name in grads:
            torch.testing.assert_close(grads_c[name], grads[name], rtol=1e-4, atol=1e-6, msg=name)
    assert set(compiled.state_dict()) == set(eager.state_dict())  # checkpoints keep their keys


def adam_steps(fused: bool, steps: int) -> tuple[list[float], dict[str, torch.Tensor]]:
    module = sccl()
    groups = [{"params": list(module.encoder.backbone.parameters()), "lr": 1e-3},
              {"params": list(module.head_parameters()), "lr": 1e-2}]
    optimizer = build_optimizer(torch.optim.Adam, groups, fused=fused)
    assert optimizer.defaults.get("fused") is (True if fused else None)
    data = batch(module, TEXTS_A, TEXTS_B)
    module.encoder.backbone.eval()
    losses = []
    for _ in range(steps):
        losses.append(loss_and_gradients(module, data)[0])
        optimizer.step()
    return losses, {n: p.detach().clone() for n, p in module.named_parameters()}


def test_fused_adam_steps_like_the_default_kernels():
    # one step from the same gradients: every parameter within rounding
    (_, plain), (_, fused) = adam_steps(False, 1), adam_steps(True, 1)
    for name in plain:
        torch.testing.assert_close(fused[name], plain[name], rtol=1e-5, atol=1e-7, msg=name)
    # later steps: Adam scales each gradient to about the learning rate, so a parameter whose gradient is
    # rounding noise (the attention keys' biases: softmax ignores them) moves by noise; the losses agree
    (plain_losses, _), (fused_losses, _) = adam_steps(False, 4), adam_steps(True, 4)
    assert fused_losses == pytest.approx(plain_losses, rel=1e-4)


def test_adam_is_fused_on_a_gpu_only_and_never_against_the_configuration():
    params = [torch.nn.Parameter(torch.zeros(2))]
    assert build_optimizer(torch.optim.Adam, [{"params": params}], fused=False).defaults["fused"] is None
    assert build_optimizer(functools.partial(torch.optim.AdamW, weight_decay=0.1), [{"params": params}],
                           fused=True).defaults["fused"] is True
    chosen = functools.partial(torch.optim.Adam, foreach=True)  # the user's choice stays
    assert build_optimizer(chosen, [{"params": params}], fused=True).defaults["fused"] is None
    assert build_optimizer(torch.optim.SGD, [{"params": params}], fused=True).defaults.get("fused") is None
    assert sccl().configure_optimizers().defaults["fused"] is None  # parameters on the CPU


def test_mixed_precision_gets_the_cached_cast_plugin_and_other_precisions_do_not():
    from lightning.pytorch.plugins.precision import MixedPrecision

    kwargs = precision_trainer_kwargs("bf16-mixed", "cpu", None)
    assert kwargs["precision"] is None and isinstance(kwargs["plugins"][0], CachedCastMixedPrecision)
    assert kwargs["plugins"][0].autocast_context_manager()._cache_enabled is True
    assert precision_trainer_kwargs("32-true", "gpu", None) == {}
    own = MixedPrecision("bf16-mixed", "cpu")
    assert precision_trainer_kwargs("bf16-mixed", "cpu", [own]) == {}


@pytest.mark.parametrize("grad_cache", [0, 24])
def test_the_cached_cast_plugin_trains_as_lightnings_plugin(toy_corpus, tmp_path, monkeypatch, grad_cache):
    """Three bf16 steps with our plugin and with Lightning's. Not bit-equal: with the cache a weight is cast once
    a step, so the gradients of its uses (every chunk, every view) add up in bf16 before the one cast back to
    float32, where Lightning adds them in float32. Within that rounding: a weight that trained through no use
    (a cast cached without a graph) would differ by its whole update, ~3e-3 (Adam moves each weight by about the
    learning rate a step); the largest difference measured is ~1e-4."""
    from ctclust.training import builders
    from ctclust.training.train import train
    from tests.helpers import compose_config, toy_overrides

    overrides = toy_overrides(toy_corpus, steps=3) + [
        "++trainer.precision=bf16-mixed", f"encoder_grad_cache_tokens={grad_cache}", "encoder_chunk_tokens=24",
        "dataset.callbacks.clustering_eval.every_n_steps=100", "method.lr=1e-3", "method.head_lr_multiplier=1"]
    states = {}
    for plugin in ("ours", "lightning"):
        if plugin == "lightning":  # Lightning's MixedPrecision, cache off
            monkeypatch.setattr(builders, "precision_trainer_kwargs", lambda *args: {})
        out = tmp_path / plugin
        train(compose_config(overrides, out))
        states[plugin] = torch.load(out / "checkpoints" / "last.ckpt", weights_only=False)["state_dict"]
    # the attention keys' biases are left out: softmax ignores them, their gradient is rounding noise that Adam
    # scales up to the learning rate (test_fused_adam_steps_like_the_default_kernels)
    compared = [n for n, v in states["lightning"].items() if v.is_floating_point() and "key.bias" not in n]
    assert len(compared) > 20
    for name in compared:
        torch.testing.assert_close(states["ours"][name], states["lightning"][name], rtol=0, atol=5e-4, msg=name)
