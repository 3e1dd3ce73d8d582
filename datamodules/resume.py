"""Where training stands in its data, saved in checkpoints, so that a resumed run draws the batches
the uninterrupted run would have drawn (docs/reliability.md "Preemption and resume").

Lightning 2.6 restores its loop counters from a checkpoint, but a plain DataLoader starts its
epoch again: a run resumed after batch b of an epoch repeats the epoch's first batches and never
sees its last b. (Lightning only fast-forwards loaders with a ``state_dict``, and a loader cannot
tell the batches training consumed from the ones it prefetched.) Here the datamodule saves the
position from Lightning's own progress counters, ``(epoch, batches of that epoch consumed)``, and
its ``train_dataloader`` skips those batches:

- map-style data: :class:`ResumableSampler` (a seed + epoch permutation, sharded over DDP ranks
  like ``DistributedSampler``) drops the first ``batches x batch_size`` indices of the epoch;
- streaming data: the dataset is told the epoch and skips, per DataLoader worker, the texts of
  the batches that worker already produced (:func:`worker_batches_done`).

The position is saved by :class:`ResumableData` (a mixin for LightningDataModules) and applied
once, to the epoch it was saved in; an epoch that had ended counts as the start of the next one.
"""
from __future__ import annotations

import itertools
import math
import warnings
from typing import Iterator

import torch
from torch.utils.data import DistributedSampler


def training_position(trainer) -> tuple[int, int]:
    """(epoch, batches of that epoch already trained on) of ``trainer``, as seen by a checkpoint.

    Read from the fit loop's progress counters, which also hold when the checkpoint is written at
    the end of an epoch or of training (when ``trainer.current_epoch`` has already moved on): the
    epoch is the one whose batches were last started. A finished epoch is reported as
    ``(epoch + 1, 0)``.
    """
    fit_loop = trainer.fit_loop
    epoch = max(0, fit_loop.epoch_progress.current.started - 1)
    progress = fit_loop.epoch_loop.batch_progress
    batches = int(progress.current.ready)
    per_epoch = trainer.num_training_batches
    epoch_over = progress.is_last_batch or (math.isfinite(per_epoch) and batches >= per_epoch)
    if batches > 0 and epoch_over:
        return epoch + 1, 0
    return int(epoch), batches


def worker_batches_done(batches: int, worker_id: int, num_workers: int) -> int:
    """Batches worker ``worker_id`` of ``num_workers`` produced among the first ``batches`` of an
    epoch: a DataLoader over an IterableDataset takes batch i from worker i mod num_workers."""
    if num_workers < 1 or not 0 <= worker_id < num_workers:
        raise ValueError(f"need 0 <= worker_id < num_workers, got {worker_id}, {num_workers}")
    return max(0, (batches - worker_id + num_workers - 1) // num_workers)


class ResumableSampler(DistributedSampler):
    """Permutation of ``range(size)`` drawn from ``seed + epoch``, this rank's share of it, and an
    optional skip of the first indices of one epoch (a resumed run).

    With one process the order is ``torch.randperm(size)`` from a generator seeded with
    ``seed + epoch``. With ``world_size`` processes the permutation is padded by wrapping around
    to a multiple of ``world_size`` and rank r takes every ``world_size``-th index from r, as
    ``DistributedSampler`` does; being one, it is not wrapped again by Lightning under DDP.
    ``__len__`` is the full epoch's count: Lightning counts the skipped batches as already done.
    """

    def __init__(self, size: int, seed: int = 0, rank: int = 0, world_size: int = 1, shuffle: bool = True):
        if size < 0:
            raise ValueError(f"size must be >= 0, got {size}")
        super().__init__(range(size), num_replicas=world_size, rank=rank, shuffle=shuffle, seed=seed)
        self.size = size
        self._skip: tuple[int, int] | None = None  # (epoch, indices to skip in that epoch)

    def resume(self, epoch: int, skip: int) -> None:
        """Start at ``epoch`` and leave out its first ``skip`` indices (this rank's)."""
        self.set_epoch(epoch)
        self._skip = (int(epoch), int(skip)) if skip > 0 else None

    def epoch_indices(self) -> list[int]:
        """This rank's indices for the current epoch, nothing skipped."""
        if self.shuffle:
            generator = torch.Generator().manual_seed(self.seed + self.epoch)
            order = torch.randperm(self.size, generator=generator).tolist()
        else:
            order = list(range(self.size))
        if self.num_replicas > 1 and order:
            padding = self.total_size - len(order)
            order += (order * math.ceil(padding / len(order)))[:padding]
            order = order[self.rank : self.total_size : self.num_replicas]
        return order

    def skipped(self) -> int:
        """Indices left out of the current epoch (0 unless it is the resumed epoch)."""
        return self._skip[1] if self._skip is not None and self._skip[0] == self.epoch else 0

    def __iter__(self) -> Iterator[int]:
        return iter(self.epoch_indices()[self.skipped() :])


class ResumableData:
    """Mixin for a LightningDataModule (list it before ``L.LightningDataModule``): its checkpoint
    state is the training position, and ``resume_position()`` gives it back after a restore.

    The ``train_dataloader`` of the datamodule applies the position: with
    :class:`ResumableSampler` (map-style) or by telling its streaming dataset to skip.
    """

    _resume_at: dict | None = None

    def state_dict(self) -> dict:
        state = dict(super().state_dict())
        trainer = getattr(self, "trainer", None)
        if trainer is not None:
            epoch, batches = training_position(trainer)
            state["training_position"] = {"epoch": epoch, "batches": batches, "world_size": trainer.world_size,
                                          "batch_size": getattr(self, "batch_size", None)}
        return state

    def load_state_dict(self, state_dict: dict) -> None:
        super().load_state_dict(state_dict)
        position = state_dict.get("training_position")
        if position is not None:
            self._resume_at = dict(position)
            # this loader does resume mid-epoch, which Lightning cannot see from the DataLoader
            warnings.filterwarnings("ignore", message="You're resuming from a checkpoint that ended before the epoch")

    def resume_position(self) -> tuple[int, int] | None:
        """(epoch, batches of it already trained on) when resuming from a checkpoint, else None.

        The count is in the checkpoint's batches per process: a different batch size converts it
        (to the batch holding the first text not trained on), a different number of processes
        starts the epoch again; both with a warning.
        """
        if self._resume_at is None:
            return None
        from lightning.pytorch.utilities import rank_zero_warn

        position = self._resume_at
        epoch, batches = int(position["epoch"]), int(position["batches"])
        trainer = getattr(self, "trainer", None)
        world = trainer.world_size if trainer is not None else 1
        saved_world, saved_size = position.get("world_size"), position.get("batch_size")
        size = getattr(self, "batch_size", None)
        if batches and saved_world not in (None, world):
            rank_zero_warn(f"resumed with {world} processes, the checkpoint was trained with {saved_world}: "
                           f"epoch {epoch} starts again from its first batch")
            return epoch, 0
        if batches and saved_size and size and saved_size != size:
            rank_zero_warn(f"resumed with batch_size={size}, the checkpoint was trained with {saved_size}: "
                           f"epoch {epoch} continues after {batches * saved_size // size * size} of its "
                           f"{batches * saved_size} texts already trained on")
            return epoch, batches * saved_size // size
        return epoch, batches


class StreamSkip:
    """The resume point of a streaming dataset: in ``epoch``, ``batches`` batches of ``batch_size``
    were trained on.

    A DataLoader over an IterableDataset takes batch i from worker i mod W and always starts with
    worker 0. After b batches the next one is due from worker b mod W, so in the resumed epoch
    worker w reads the stream of worker (w + b) mod W (:meth:`source_worker`), without the
    batches that stream had already given (:meth:`apply`): the batches then come in the order of
    the uninterrupted run.
    """

    def __init__(self, epoch: int, batches: int, batch_size: int):
        if batches < 0 or batch_size < 1:
            raise ValueError(f"need batches >= 0 and batch_size >= 1, got {batches}, {batch_size}")
        self.epoch, self.batches, self.batch_size = int(epoch), int(batches), int(batch_size)

    def source_worker(self, epoch: int, worker_id: int, num_workers: int) -> int:
        """The worker of the uninterrupted run whose stream worker ``worker_id`` continues."""
        return (worker_id + self.batches) % num_workers if epoch == self.epoch else worker_id

    def apply(self, items: Iterator, epoch: int, source_worker: int, num_workers: int) -> Iterator:
        """``items`` (the stream of ``source_worker`` in ``epoch``) without those already trained on."""
        if epoch != self.epoch:
            return items
        skip = worker_batches_done(self.batches, source_worker, num_workers) * self.batch_size
        return itertools.islice(items, skip, None)
