"""NLI sentence pairs for PairSupCon (docs/methods/pairsupcon.md): the datasets, the collator and the
datamodule. The files, their layouts and readers: :mod:`datamodules.nli_files`.

Large files are read lazily by :class:`StreamingNLIDataset` (shuffle buffer, sharded over
DataLoader workers and DDP ranks); small ones can be loaded whole into :class:`NLIPairDataset`.
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Iterator, Mapping

import lightning as L
import torch
from torch.utils.data import DataLoader, Dataset, IterableDataset, get_worker_info

from datamodules import text_decoding
from datamodules.loader_options import LoaderSettings
from datamodules.nli_files import (
    NLIPair,
    count_pairs,
    detect_format,
    has_pairs,
    iter_pairs,
    read_pairs,
)
from datamodules.resume import ResumableData, ResumableSampler, StreamSkip
from datamodules.streaming import EpochAwareLoader, distributed_rank_world, shuffle_buffer
from datamodules.tokenizer import LazyTokenizer
from textcore.data_kinds import NLI
from textcore.encoding.token_batches import tokenize_batch
from textcore.errors import DataConfigError


# -- datasets ------------------------------------------------------------------------------------
class NLIPairDataset(Dataset):
    """Map-style: every pair in memory, for files that fit."""

    def __init__(self, pairs: list[NLIPair]):
        self.pairs = pairs

    def __len__(self) -> int:
        return len(self.pairs)

    def __getitem__(self, i: int) -> NLIPair:
        return self.pairs[i]


class StreamingNLIDataset(IterableDataset):
    """Reads an NLI file lazily, line by line, never holding more than the shuffle buffer.

    Sharding: the i-th kept pair goes to shard ``i mod (world_size * num_workers)``, shard
    ``rank * num_workers + worker_id``, so every pair is read by exactly one worker of one rank
    per epoch. Each shard parses the whole file and skips the others' pairs (cheap next to a
    forward pass) so the split does not depend on how labels are distributed.

    ``rank``/``world_size`` default to the initialised ``torch.distributed`` group (or 0/1);
    :class:`EpochAwareLoader` sets them in the main process before workers start.
    ``num_pairs`` (optional, e.g. from :func:`count_pairs`) trims the stream to a multiple of the
    number of shards so that every rank gets the same number of pairs, which DDP needs to avoid
    one rank waiting for another's extra batch at the end of the epoch.

    Shuffling uses a buffer of ``buffer_size`` pairs and an RNG seeded by (seed, epoch, shard):
    call :meth:`set_epoch` each epoch for a new order (:class:`EpochAwareLoader` does this).
    """

    def __init__(
        self,
        path: str | Path,
        fmt: str | None = None,
        shuffle: bool = True,
        buffer_size: int = 10_000,
        seed: int = 0,
        rank: int | None = None,
        world_size: int | None = None,
        num_pairs: int | None = None,
        encoding: str | None = None,
    ):
        super().__init__()
        if buffer_size < 1:
            raise DataConfigError(f"dataset.buffer_size must be >= 1, got {buffer_size}")
        self.path = Path(path)
        self.encoding = encoding
        self.fmt = fmt or detect_format(self.path, encoding)  # fail on a bad file now, not inside a worker
        self.shuffle = shuffle
        self.buffer_size = buffer_size
        self.seed = seed
        self.rank = rank
        self.world_size = world_size
        self.num_pairs = num_pairs
        self.epoch = 0

    def set_epoch(self, epoch: int) -> None:
        self.epoch = int(epoch)

    def set_distributed(self, rank: int, world_size: int) -> None:
        self.rank, self.world_size = int(rank), int(world_size)

    def shard(self) -> tuple[int, int]:
        """(this shard's index, number of shards) for the calling worker."""
        if self.rank is None or self.world_size is None:
            rank, world = distributed_rank_world()
        else:
            rank, world = self.rank, self.world_size
        info = get_worker_info()
        workers, worker_id = (info.num_workers, info.id) if info is not None else (1, 0)
        return rank * workers + worker_id, world * workers

    def _own_pairs(self, index: int, count: int) -> Iterator[NLIPair]:
        limit = None if self.num_pairs is None else (self.num_pairs // count) * count
        for i, pair in enumerate(iter_pairs(self.path, self.fmt, self.encoding)):
            if limit is not None and i >= limit:
                return
            if i % count == index:
                yield pair

    def __iter__(self) -> Iterator[NLIPair]:
        index, count = self.shard()
        skip = getattr(self, "resume_skip", None)  # a resumed run continues where each stream stopped
        if skip is not None:
            info = get_worker_info()
            workers, worker_id = (info.num_workers, info.id) if info is not None else (1, 0)
            source = skip.source_worker(self.epoch, worker_id, workers)
            index += source - worker_id
        pairs = self._own_pairs(index, count)
        if self.shuffle:
            pairs = shuffle_buffer(pairs, self.buffer_size, random.Random(f"{self.seed}-{self.epoch}-{index}"))
        return skip.apply(pairs, self.epoch, source, workers) if skip is not None else pairs


class NLICollator:
    """Tokenises sentence1 and sentence2 separately, each padded to the longest in the batch."""

    def __init__(self, tokenizer, max_length: int = 32):
        self.tokenizer = tokenizer
        self.max_length = max_length

    def tokenize(self, texts: list[str]) -> dict:
        # the token counts travel as a list: the encoder plans its calls without reading the GPU
        return tokenize_batch(self.tokenizer, texts, self.max_length)

    def __call__(self, pairs: list[NLIPair]) -> dict:
        texts1 = [p[0] for p in pairs]
        texts2 = [p[1] for p in pairs]
        return {
            "s1": self.tokenize(texts1),
            "s2": self.tokenize(texts2),
            "labels": torch.tensor([p[2] for p in pairs], dtype=torch.long),  # [B], 1 = entailment
            "texts1": texts1,
            "texts2": texts2,
        }


class NLIDataModule(LazyTokenizer, ResumableData, L.LightningDataModule):
    """NLI pairs for PairSupCon training (docs/methods/pairsupcon.md).

    Args:
        path: the NLI file; or give ``data_dir`` + ``file``.
        format: force a layout from :data:`FORMATS` instead of detecting it.
        tokenizer: a name for :func:`load_tokenizer` (``minilm``, ``tiny``, Hub name, folder)
            or a tokenizer object.
        streaming: read lazily with a shuffle buffer (large files) instead of loading all pairs.
        buffer_size: pairs held by each shard's shuffle buffer when streaming.
        equalize_ranks: under DDP with streaming, count the pairs once at set-up and trim the
            stream so all ranks see the same number of pairs (see :class:`StreamingNLIDataset`).
        seed: shuffling seed (map-style: a seed + epoch permutation; streaming: buffer RNG with epoch).
        encoding: the file's text encoding (``dataset.encoding``; UTF-8 by default).
    """

    data_kind = NLI  # what it yields; methods declare the kinds they train on (trains_on)

    def __init__(
        self,
        path: str | None = None,
        data_dir: str = ".",
        file: str | None = None,
        format: str | None = None,
        batch_size: int = 64,
        max_length: int = 32,
        tokenizer="minilm",
        streaming: bool = True,
        buffer_size: int = 10_000,
        seed: int = 0,
        drop_last: bool = False,
        equalize_ranks: bool = True,
        encoding: str = text_decoding.DEFAULT_ENCODING,
        *,
        loader: LoaderSettings | Mapping,
    ):
        super().__init__()
        if path is None and file is None:
            raise DataConfigError("NLIDataModule needs `path=<file>` or `data_dir=<folder>` with `file=<name>`.")
        self.path = Path(path) if path is not None else Path(data_dir) / file
        self.format = format
        self.batch_size = batch_size
        self.max_length = max_length
        self.tokenizer_spec = tokenizer
        self.streaming = streaming
        self.buffer_size = buffer_size
        self.loader = LoaderSettings.of(loader)
        self.seed = seed
        self.drop_last = drop_last
        self.equalize_ranks = equalize_ranks
        self.encoding = text_decoding.check_encoding(encoding)
        self.train_set: Dataset | IterableDataset | None = None
        self._first_epoch: int | None = None

    def _rank_world(self) -> tuple[int, int]:
        trainer = getattr(self, "trainer", None)
        if trainer is not None:
            return trainer.global_rank, trainer.world_size
        return distributed_rank_world()

    def _epoch(self) -> int:
        if self._first_epoch is not None:  # the resumed epoch, for the loader's first iterator
            epoch, self._first_epoch = self._first_epoch, None
            return epoch
        trainer = getattr(self, "trainer", None)
        return trainer.current_epoch if trainer is not None else self.train_set.epoch

    def setup(self, stage: str | None = None) -> None:
        if self.train_set is not None:
            return
        fmt = self.format or detect_format(self.path, self.encoding)
        if not self.streaming:
            pairs = read_pairs(self.path, fmt, self.encoding)
            if not pairs:
                raise DataConfigError(self._no_pairs_message())
            self.train_set = NLIPairDataset(pairs)
            return
        # a stream without a single usable pair would give empty epochs forever
        if not has_pairs(self.path, fmt, self.encoding):
            raise DataConfigError(self._no_pairs_message())
        _, world = self._rank_world()
        num_pairs = count_pairs(self.path, fmt, self.encoding) if (self.equalize_ranks and world > 1) else None
        self.train_set = StreamingNLIDataset(
            self.path, fmt, shuffle=True, buffer_size=self.buffer_size, seed=self.seed, num_pairs=num_pairs,
            encoding=self.encoding,
        )

    def _no_pairs_message(self) -> str:
        return (
            f"'{self.path}' has no entailment or contradiction pairs (neutral and unlabeled pairs are dropped), "
            "so PairSupCon has nothing to train on; point `dataset.file` (or `data_dir`) at an NLI file with "
            "entailment/contradiction labels."
        )

    def train_dataloader(self) -> DataLoader:
        self.setup()
        collate = NLICollator(self.tokenizer, self.max_length)
        position = self.resume_position()  # (epoch, batches done) when resuming from a checkpoint
        if not self.streaming:
            rank, world = self._rank_world()
            sampler = ResumableSampler(len(self.train_set), self.seed, rank, world)  # seed + epoch permutation
            if position is not None:
                sampler.resume(position[0], position[1] * self.batch_size)
            return DataLoader(
                self.train_set,
                batch_size=self.batch_size,
                sampler=sampler,
                generator=torch.Generator().manual_seed(self.seed),  # no draw from the global RNG
                drop_last=self.drop_last,
                collate_fn=collate,
                **self.loader.dataloader_kwargs(),
            )
        if position is not None:
            self._first_epoch = position[0]
            self.train_set.resume_skip = StreamSkip(position[0], position[1], self.batch_size)
        return EpochAwareLoader(
            self.train_set,
            generator=torch.Generator().manual_seed(self.seed),  # its iterators must not draw from the global RNG
            batch_size=self.batch_size,
            drop_last=self.drop_last,
            collate_fn=collate,
            **self.loader.dataloader_kwargs(persistent=False),  # a streamed file never keeps workers
            epoch_source=self._epoch,
            rank_source=self._rank_world,
        )
