"""All-gather for contrastive negatives under DDP (docs/methods/shared.md).

``gather_with_grad`` concatenates every process's tensor along dim 0; the slice that belongs
to this process is the original tensor, so gradients flow to local embeddings, while the
other processes' slices are constants. Every process then computes the loss over the whole
global batch, exactly the loss one process would compute on the concatenated batch, and the
gradient it sends to its local embeddings is the single-process gradient restricted to them.

DDP averages parameter gradients over processes; since each process only back-propagates
into its own slice, the sum (not the mean) of those gradients is the single-process
gradient. ``ddp_loss_scale`` returns the factor (the world size) that undoes the averaging.
"""
from __future__ import annotations

import torch
import torch.distributed as dist


def is_distributed() -> bool:
    return dist.is_available() and dist.is_initialized()


def world_size() -> int:
    return dist.get_world_size() if is_distributed() else 1


def rank() -> int:
    return dist.get_rank() if is_distributed() else 0


def gather_with_grad(tensor: torch.Tensor) -> torch.Tensor:
    """[n, ...] on each of W processes -> [W*n, ...] in rank order; local slice keeps its grad.

    All processes must hold the same number of rows (DDP with ``drop_last`` batches).
    """
    if not is_distributed() or world_size() == 1:
        return tensor
    parts = [torch.empty_like(tensor) for _ in range(world_size())]
    dist.all_gather(parts, tensor.detach().contiguous())
    parts[rank()] = tensor
    return torch.cat(parts, dim=0)


def ddp_loss_scale() -> float:
    """Multiply a loss computed on gathered embeddings by this before backward (see module doc)."""
    return float(world_size())
