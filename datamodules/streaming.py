"""Pieces shared by the streaming datasets (Wikipedia sentences, NLI pairs): where this process
sits in DDP, and the bounded-memory buffer shuffle."""

from __future__ import annotations

import random
from typing import Iterable, Iterator


def distributed_rank_world(rank: int | None = None, world_size: int | None = None) -> tuple[int, int]:
    """(rank, world size) from torch.distributed when it is initialised, else (0, 1); arguments win."""
    if rank is None or world_size is None:
        import torch.distributed as dist

        initialised = dist.is_available() and dist.is_initialized()
        rank = (dist.get_rank() if initialised else 0) if rank is None else rank
        world_size = (dist.get_world_size() if initialised else 1) if world_size is None else world_size
    if world_size < 1 or not 0 <= rank < world_size:
        raise ValueError(f"need 0 <= rank < world_size, got rank={rank}, world_size={world_size}")
    return int(rank), int(world_size)


def shuffle_buffer(items: Iterable, buffer_size: int, rng: random.Random) -> Iterator:
    """Approximate shuffle of a stream holding at most ``buffer_size`` items in memory.

    Fills the buffer, then for every further item emits a random buffered one and puts the new
    item in its place; the rest is shuffled at the end. Items at most about ``buffer_size`` apart
    in the stream get mixed, so a stream sorted by topic should be shuffled once on disk first.
    """
    buffer: list = []
    for item in items:
        if len(buffer) < buffer_size:
            buffer.append(item)
            continue
        j = rng.randrange(buffer_size)
        yield buffer[j]
        buffer[j] = item
    rng.shuffle(buffer)
    yield from buffer
