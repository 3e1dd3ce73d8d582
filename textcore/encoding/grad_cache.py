"""Cached gradients (GradCache; Gao, Zhang, Han and Callan, "Scaling Deep Contrastive Learning Batch Size
under Memory Limited Setup", RepL4NLP 2021) for the text encoder.

A contrastive loss needs the whole batch's embeddings at once, so the encoder's activations for every
text are normally held until the backward pass: memory grows with the batch. Here the encoder runs the
batch in mini-batches without building a graph, the method's loss sees the full batch of embeddings
(its negatives, its clustering state, everything as usual) and backpropagates to them, and only then
is each mini-batch run again, with its graph, and given its rows of the embedding gradient. At any time
the graph of one mini-batch exists, and the parameter gradients are those of one big step:

- dropout draws the same masks in the replay: each mini-batch's random-number state (CPU and, on a GPU,
  CUDA) is saved before its first run and restored for the replay, inside ``torch.random.fork_rng`` so
  the run's own random sequence is the one it would have been without caching;
- the autocast setting of the forward pass is restored for the replays (mixed precision), one autocast region for
  all of them, so that each weight is cast to bf16/fp16 once (the cast cache) and not once per mini-batch; the
  first pass runs with that cache off (its casts carry no graph and must not be reused with one);
- each parameter's gradient is summed in place over the mini-batches;
- the method's code runs once per step: only the encoder is replayed, so state a step changes
  (ClusterNS's centroids, AECL's pseudo-labels) changes once;
- the parameter gradients are returned as the gradients of this function's inputs, so every parameter
  receives one gradient per step and DDP reduces it as usual; gathered negatives (method code, after the
  encoder) still span all processes.
"""
from __future__ import annotations

from typing import Callable, Sequence

import torch


def rng_state(device: torch.device) -> dict:
    state = {"cpu": torch.get_rng_state()}
    if device.type == "cuda":
        state["cuda"] = torch.cuda.get_rng_state(device)
    return state


def set_rng_state(state: dict, device: torch.device) -> None:
    torch.set_rng_state(state["cpu"])
    if "cuda" in state:
        torch.cuda.set_rng_state(state["cuda"], device)


class CachedEncoding(torch.autograd.Function):
    """Embeddings [B, d] of ``chunks`` (each a callable returning [b, d] for its rows ``rows[i]``), with the
    encoder's graph built one chunk at a time in backward. ``params`` are the parameters to differentiate.

    ``inputs`` (optional, [B, T, e]): a tensor computed outside, e.g. the batch's word embeddings; each chunk
    is then called with its rows of it cut to ``widths[i]`` tokens, and the gradient of ``inputs`` is returned
    (so the lookup that made it runs, and gives its table a gradient, once a step instead of once a chunk)."""

    @staticmethod
    def forward(ctx, chunks: Sequence[Callable[..., torch.Tensor]], rows: Sequence[torch.Tensor],
                widths: Sequence[int] | None, device: torch.device, inputs: torch.Tensor | None,
                *params: torch.Tensor) -> torch.Tensor:
        ctx.chunks, ctx.rows, ctx.widths, ctx.device = chunks, rows, widths, device
        ctx.inputs = None if inputs is None else inputs.detach()
        ctx.autocast = (device.type, torch.is_autocast_enabled(device.type), torch.get_autocast_dtype(device.type))
        ctx.states, parts = [], []
        _, autocast_on, autocast_dtype = ctx.autocast
        with torch.autocast(device.type, dtype=autocast_dtype, enabled=autocast_on, cache_enabled=False):
            for i, run in enumerate(chunks):
                ctx.states.append(rng_state(device))
                parts.append(run(*CachedEncoding._slice(ctx, i)))  # no graph: autograd is off inside forward
        ctx.save_for_backward(*params)
        order = torch.cat(list(rows))  # [B] batch rows in chunk order
        inverse = torch.empty_like(order)
        inverse[order] = torch.arange(order.numel(), device=order.device)
        return torch.cat(parts).index_select(0, inverse)  # [B, d] in batch order

    @staticmethod
    def _slice(ctx, i: int) -> tuple:
        """The arguments of chunk ``i``: its rows of ``inputs`` cut to its width, or none."""
        if ctx.inputs is None:
            return ()
        return (ctx.inputs.index_select(0, ctx.rows[i])[:, : ctx.widths[i]],)  # [b, width, e]

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        params = ctx.saved_tensors
        totals: list[torch.Tensor | None] = [None] * len(params)
        inputs_grad = None if ctx.inputs is None else torch.zeros_like(ctx.inputs)  # [B, T, e]
        device_type, autocast_on, autocast_dtype = ctx.autocast
        devices = [ctx.device] if ctx.device.type == "cuda" else []
        with torch.autocast(device_type, dtype=autocast_dtype, enabled=autocast_on):
            for i, (run, rows, state) in enumerate(zip(ctx.chunks, ctx.rows, ctx.states)):
                args = tuple(a.requires_grad_() for a in CachedEncoding._slice(ctx, i))  # fresh slices: leaves
                with torch.random.fork_rng(devices=devices):
                    set_rng_state(state, ctx.device)
                    with torch.enable_grad():
                        out = run(*args)  # [b, d], with its graph
                parts = torch.autograd.grad(out, [*params, *args], grad.index_select(0, rows).to(out.dtype),
                                            allow_unused=True)
                if args and parts[-1] is not None:
                    inputs_grad[:, : ctx.widths[i]].index_add_(0, rows, parts[-1].to(inputs_grad.dtype))
                for j, part in enumerate(parts[: len(params)]):
                    if part is None:
                        continue
                    if totals[j] is None:
                        totals[j] = part  # a fresh tensor of autograd's: summed into below, in place
                    else:
                        totals[j].add_(part)
        return (None, None, None, None, inputs_grad, *totals)


def cached_encoding(chunks: Sequence[Callable[..., torch.Tensor]], rows: Sequence[torch.Tensor],
                    params: Sequence[torch.Tensor], device: torch.device, inputs: torch.Tensor | None = None,
                    widths: Sequence[int] | None = None) -> torch.Tensor:
    """Apply :class:`CachedEncoding`; ``params`` must be the trainable parameters the chunks use (besides
    ``inputs``, whose rows, cut to ``widths``, each chunk then takes as its one argument)."""
    if inputs is not None and (widths is None or len(widths) != len(chunks)):
        raise ValueError("cached_encoding: inputs need one width per chunk")
    return CachedEncoding.apply(list(chunks), list(rows), None if widths is None else list(widths), device, inputs,
                                *params)
