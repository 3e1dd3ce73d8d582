"""Unlabelled sentences streamed from a text file, one sentence per line (docs/methods/clusterns.md: SimCSE and
ClusterNS train on one million Wikipedia sentences; users may bring far larger files).

The file is never loaded: each DataLoader worker reads it line by line, keeps the lines of its own
shard and shuffles them through a fixed-size buffer, so memory stays flat as the file grows
(about ``buffer_size`` lines per worker).

Sharding: empty lines are skipped and the j-th non-empty line goes to shard
``j mod (world_size * num_workers)``: DDP rank ``j mod world_size``, and within that rank worker
``(j // world_size) mod num_workers``. Every line is read by exactly one (rank, worker) per epoch.
With ``even_shards`` (default) the last ``N mod world_size`` lines are dropped so that every rank
sees the same number of texts, and hence runs the same number of steps: a rank with one batch
more would wait forever for the others in a collective. With one process nothing is dropped.

Shuffling: a buffer shuffle (fill ``buffer_size`` lines, then emit a random one and replace it
with the next line), seeded by (seed, epoch, rank, worker): reproducible, different every epoch.
A buffer shuffle only mixes lines that are at most about ``buffer_size`` apart in the file per
worker, so a file sorted by topic should be shuffled once on disk (e.g. ``shuf``) first.
"""

from __future__ import annotations

import os
import random
from pathlib import Path
from typing import Iterator, Mapping

import lightning as L
import numpy as np
import torch
from torch.utils.data import IterableDataset, get_worker_info

from datamodules import text_decoding
from datamodules.loader_options import LoaderSettings
from datamodules.resume import ResumableData, StreamSkip
from datamodules.streaming import EpochAwareLoader, distributed_rank_world, shuffle_buffer
from datamodules.tokenizer import LazyTokenizer
from textcore.data_kinds import SENTENCES
from textcore.encoding.token_batches import with_token_counts
from textcore.errors import MissingFileError, UserError


class TextFileError(UserError, ValueError):
    """The training text file cannot be used (a folder, or no sentence in it)."""


def check_text_file(path: str | Path, encoding: str | None = None) -> Path:
    """The path as a ``Path`` after checking it is a readable file with at least one sentence."""
    path = Path(path)
    if not path.exists():
        raise MissingFileError(
            f"Training text file {path} not found. Set data_dir (or dataset.path) so that it "
            "points at a text file with one sentence per line, e.g. SimCSE's wiki1m_for_simcse.txt."
        )
    if not path.is_file():
        raise TextFileError(
            f"Training text path {path} is a folder; set dataset.path to a text file, one sentence a line."
        )
    if not any(line.strip() for line in text_decoding.iter_lines(path, encoding)):
        raise TextFileError(
            f"Training text file {path} is empty (no non-empty line); set dataset.path to a text file with "
            "one sentence per line."
        )
    return path


class StreamingTextDataset(IterableDataset):
    """Non-empty, stripped lines of ``path``, sharded over DDP ranks and DataLoader workers.

    ``rank``/``world_size`` default to torch.distributed's values at construction time (build the
    dataset after the process group exists, e.g. in ``LightningDataModule.setup``).
    ``buffer_size`` <= 1 keeps file order.
    """

    def __init__(
        self,
        path: str | Path,
        buffer_size: int = 10000,
        seed: int = 0,
        rank: int | None = None,
        world_size: int | None = None,
        even_shards: bool = True,
        encoding: str | None = None,
    ):
        super().__init__()
        if seed < 0:
            raise TextFileError(f"seed must be a non-negative integer, got {seed}")
        self.encoding = encoding
        self.path = check_text_file(path, encoding)
        self.buffer_size = int(buffer_size)
        self.seed = int(seed)
        self.rank, self.world_size = distributed_rank_world(rank, world_size)
        self.even_shards = even_shards
        # Shared memory so that set_epoch also reaches persistent worker processes.
        self._epoch = torch.zeros((), dtype=torch.int64).share_memory_()
        self._count_cache: tuple[tuple[int, int], int] | None = None

    # ----------------------------------------------------------------------------- epoch / length

    def set_epoch(self, epoch: int) -> None:
        self._epoch.fill_(int(epoch))

    @property
    def epoch(self) -> int:
        return int(self._epoch.item())

    def count_texts(self) -> int:
        """Number of non-empty lines in the file (one streaming pass, cached while unchanged)."""
        stat = self.path.stat()
        key = (stat.st_size, stat.st_mtime_ns)
        if self._count_cache is None or self._count_cache[0] != key:
            self._count_cache = (key, sum(1 for _ in self._texts()))
        return self._count_cache[1]

    def __len__(self) -> int:
        """Texts this rank yields per epoch, over all its workers."""
        total = self.count_texts()
        if self.even_shards:
            return total // self.world_size
        return max(0, (total - self.rank + self.world_size - 1) // self.world_size)

    def worker_counts(self, num_workers: int) -> list[int]:
        """Texts each of this rank's workers yields per epoch (the rank's k-th text goes to k mod W)."""
        n = len(self)
        return [max(0, (n - w + num_workers - 1) // num_workers) for w in range(num_workers)]

    # ----------------------------------------------------------------------------- iteration

    def _texts(self) -> Iterator[str]:
        # a bad byte is reported at its own line (text files decode in chunks, so the line being read
        # when the error surfaces is not the one that holds the byte)
        for line in text_decoding.iter_lines(self.path, self.encoding):
            text = line.strip()
            if text:
                yield text

    def _shard_texts(self, worker_id: int, num_workers: int) -> Iterator[str]:
        """This (rank, worker)'s texts in file order."""
        world, rank = self.world_size, self.rank
        pending = None
        for j, text in enumerate(self._texts()):
            if j % world == rank and (j // world) % num_workers == worker_id:
                pending = text
            # With even shards a text waits until its round of `world` lines is complete, so the
            # incomplete last round (the N mod world_size leftover lines) is dropped on every rank.
            if pending is not None and (not self.even_shards or j % world == world - 1):
                yield pending
                pending = None

    def _rng(self, worker_id: int) -> random.Random:
        state = np.random.SeedSequence([self.seed, self.epoch, self.rank, worker_id]).generate_state(4)
        return random.Random(int.from_bytes(state.tobytes(), "little"))

    def iter_shard(self, worker_id: int = 0, num_workers: int = 1) -> Iterator[str]:
        """Shuffled texts of one worker; ``__iter__`` calls this with the real worker info."""
        if not 0 <= worker_id < num_workers:
            raise ValueError(f"need 0 <= worker_id < num_workers, got {worker_id}, {num_workers}")
        skip = getattr(self, "resume_skip", None)  # a resumed run continues where each stream stopped
        if skip is not None:
            worker_id = skip.source_worker(self.epoch, worker_id, num_workers)
        stream = self._shard_texts(worker_id, num_workers)
        if self.buffer_size > 1:
            stream = shuffle_buffer(stream, self.buffer_size, self._rng(worker_id))
        return skip.apply(stream, self.epoch, worker_id, num_workers) if skip is not None else stream

    def __iter__(self) -> Iterator[str]:
        info = get_worker_info()
        return self.iter_shard(info.id, info.num_workers) if info is not None else self.iter_shard(0, 1)


class TextCollator:
    """Tokenise a list of texts, padding to the longest of the batch, truncating at max_length."""

    KEYS = ("input_ids", "attention_mask", "token_type_ids")

    def __init__(self, tokenizer, max_length: int = 32):
        self.tokenizer = tokenizer
        self.max_length = max_length

    def __call__(self, texts: list[str]) -> dict:
        encoded = self.tokenizer(
            list(texts), padding="longest", truncation=True, max_length=self.max_length, return_tensors="pt"
        )
        batch = with_token_counts({key: encoded[key] for key in self.KEYS if key in encoded})  # each [B, T]
        batch["texts"] = list(texts)
        return batch


class StreamingTextDataModule(LazyTokenizer, ResumableData, L.LightningDataModule):
    """Training batches of sentences streamed from ``path`` (one sentence per line).

    Batch: ``{"input_ids", "attention_mask", ["token_type_ids"], "texts"}``. ``tokenizer`` (an
    object) wins over ``tokenizer_name`` (loaded with ``textcore.encoding.backbone.load_tokenizer``:
    "minilm", "tiny", a Hub name or a folder). ``rank``/``world_size`` override the values read
    from torch.distributed (for tests). Memory: about ``buffer_size`` lines per worker.
    ``encoding``: the file's text encoding (``dataset.encoding``, UTF-8 by default).
    """

    data_kind = SENTENCES  # what it yields; methods declare the kinds they train on (trains_on)

    def __init__(
        self,
        path: str | Path,
        batch_size: int = 64,
        max_length: int = 32,
        buffer_size: int = 10000,
        seed: int = 0,
        tokenizer_name: str = "minilm",
        tokenizer=None,
        rank: int | None = None,
        world_size: int | None = None,
        even_shards: bool = True,
        drop_last: bool = False,
        encoding: str = text_decoding.DEFAULT_ENCODING,
        *,
        loader: LoaderSettings | Mapping,
    ):
        super().__init__()
        self.save_hyperparameters(ignore=["tokenizer", "loader"])  # speed settings: config_resolved.yaml has them
        self.encoding = text_decoding.check_encoding(encoding)
        self.path = check_text_file(path, self.encoding)  # fail before any model is loaded
        self.batch_size = batch_size
        self.max_length = max_length
        self.buffer_size = buffer_size
        self.loader = LoaderSettings.of(loader)
        self.seed = seed
        self.tokenizer_spec = tokenizer if tokenizer is not None else tokenizer_name
        self.rank = rank
        self.world_size = world_size
        self.even_shards = even_shards
        self.drop_last = drop_last
        self.dataset: StreamingTextDataset | None = None

    def setup(self, stage: str | None = None) -> None:
        # Built here, not in __init__: under DDP the process group exists only by now. A dataset
        # built earlier (ctclust.training calls setup before the Trainer starts DDP) saw rank 0 of 1 and is
        # rebuilt once the process group tells a different rank or world size.
        if self.dataset is None or (self.dataset.rank, self.dataset.world_size) != distributed_rank_world(
            self.rank, self.world_size
        ):
            self.dataset = StreamingTextDataset(
                self.path, self.buffer_size, self.seed, self.rank, self.world_size, self.even_shards, self.encoding
            )

    def train_dataloader(self) -> EpochAwareLoader:
        self.setup("fit")
        if self.loader.num_workers > 0:
            # Tokenizer threads plus forked workers can deadlock; the library warns and we agree.
            os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
        position = self.resume_position()  # (epoch, batches done) when resuming from a checkpoint
        if position is not None:
            # before the iterator exists: it draws the epoch's shuffle when it is created
            self.dataset.set_epoch(position[0])
            self.dataset.resume_skip = StreamSkip(position[0], position[1], self.batch_size)
        return EpochAwareLoader(
            self.dataset,
            generator=torch.Generator().manual_seed(self.seed),  # its iterators must not draw from the global RNG
            batch_size=self.batch_size,
            collate_fn=TextCollator(self.tokenizer, self.max_length),
            drop_last=self.drop_last,
            **self.loader.dataloader_kwargs(),
        )
