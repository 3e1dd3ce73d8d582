"""Pieces shared by the streaming datasets (Wikipedia sentences, NLI pairs): where this process
sits in DDP, the bounded-memory buffer shuffle, and the one DataLoader that tells a stream its epoch."""

from __future__ import annotations

import random
from typing import Callable, Iterable, Iterator

from torch.utils.data import DataLoader, Sampler


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


class _EpochRelay(Sampler):
    """Takes the place of the dummy sampler a DataLoader keeps for an IterableDataset.

    Lightning calls ``dataloader.sampler.set_epoch(epoch)`` at the start of every epoch (also after resuming
    from a checkpoint); this forwards the call to the dataset. Iteration yields ``None`` forever, as the dummy
    sampler does.
    """

    def __init__(self, dataset):
        self.dataset = dataset

    def set_epoch(self, epoch: int) -> None:
        self.dataset.set_epoch(epoch)

    def __iter__(self):
        while True:
            yield None


class EpochAwareLoader(DataLoader):
    """DataLoader over a streaming dataset (an ``IterableDataset`` with ``set_epoch``) that tells the dataset
    the epoch, and the DDP rank, before its workers start.

    - Lightning's per-epoch ``sampler.set_epoch`` reaches the dataset (an IterableDataset has no sampler of
      its own). A dataset whose workers persist must keep its epoch where they see it (shared memory, as
      ``StreamingTextDataset`` does); otherwise workers are created at each ``iter()`` and copy the dataset.
    - ``epoch_source`` / ``rank_source`` (optional): called at each ``iter()``, their values are given to
      ``dataset.set_epoch`` / ``dataset.set_distributed`` (outside a Trainer, or where the rank is known only
      once the Trainer exists).
    - ``len()``: exact when the dataset counts its workers' items (``worker_counts(num_workers)``): every
      worker collates its own batches, its last one partial, so DataLoader's own estimate
      (``ceil(len(dataset) / batch_size)``) undercounts with several workers, and Lightning ends the epoch
      after ``len(dataloader)`` batches.
    """

    def __init__(
        self,
        dataset,
        *args,
        epoch_source: Callable[[], int] | None = None,
        rank_source: Callable[[], tuple[int, int]] | None = None,
        **kwargs,
    ):
        super().__init__(dataset, *args, **kwargs)
        # DataLoader forbids re-assigning `sampler` after construction; for an IterableDataset batches are
        # drawn through `batch_sampler`, so `sampler` only serves set_epoch.
        object.__setattr__(self, "sampler", _EpochRelay(dataset))
        self.epoch_source = epoch_source
        self.rank_source = rank_source

    def __iter__(self):
        if self.epoch_source is not None:
            self.dataset.set_epoch(self.epoch_source())
        if self.rank_source is not None:
            self.dataset.set_distributed(*self.rank_source())
        return super().__iter__()

    def __len__(self) -> int:
        if not hasattr(self.dataset, "worker_counts"):
            return super().__len__()
        counts = self.dataset.worker_counts(max(1, self.num_workers))
        if self.batch_size is None:
            return sum(counts)
        if self.drop_last:
            return sum(c // self.batch_size for c in counts)
        return sum(-(-c // self.batch_size) for c in counts)
