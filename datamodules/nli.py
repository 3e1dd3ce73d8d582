"""NLI sentence pairs for PairSupCon (docs/methods/pairsupcon.md).

Every reader yields ``(sentence1, sentence2, y)`` with ``y = 1`` for entailment and ``y = 0`` for
contradiction; neutral pairs and pairs without a gold label (``-`` or empty, as in SNLI/MultiNLI
where annotators disagreed) are dropped, as PairSupCon does.

Supported layouts (detected from the file name and its header, see :func:`detect_format`):

- ``jsonl``: SNLI/MultiNLI ``*.jsonl`` releases, one JSON object per line with ``sentence1``,
  ``sentence2`` and ``gold_label``.
- ``tsv``: SNLI/MultiNLI ``*.txt``/``*.tsv`` releases, tab-separated with a header naming
  ``gold_label``, ``sentence1`` and ``sentence2`` among other columns.
- ``triplet_csv``: SimCSE's ``nli_for_simcse.csv`` layout ``sent0,sent1,hard_neg``; each row
  gives two pairs, ``(sent0, sent1, 1)`` and ``(sent0, hard_neg, 0)``.
- ``pair_csv``: ``sentence1,sentence2,label`` (or ``gold_label``, as in
  ``nli_sample.csv``). The label is either text (entailment / contradiction /
  neutral, any case; ``-`` or empty = unlabeled) or an integer in THIS project's convention:
  ``1 = entailment, 0 = contradiction``. Other integers are rejected, because Hugging Face's
  SNLI/MNLI use 0 = entailment, 1 = neutral, 2 = contradiction and silently mixing the two
  conventions would flip the labels.
- ``senteval``: SentEval's SNLI layout, three aligned files ``s1.<split>``, ``s2.<split>``,
  ``labels.<split>`` in one folder; pass the path of any of the three.

Large files are read lazily by :class:`StreamingNLIDataset` (shuffle buffer, sharded over
DataLoader workers and DDP ranks); small ones can be loaded whole into :class:`NLIPairDataset`.
"""

from __future__ import annotations

import csv
import json
import random
import re
import sys
from pathlib import Path
from typing import Callable, Iterator

import lightning as L
import torch
from torch.utils.data import DataLoader, Dataset, IterableDataset, get_worker_info

from datamodules import text_io
from datamodules.loader_options import loader_options
from datamodules.resume import ResumableData, ResumableSampler, StreamSkip
from datamodules.short_text import DataConfigError
from datamodules.streaming import EpochAwareLoader, distributed_rank_world, shuffle_buffer
from datamodules.tokenizer import LazyTokenizer
from lightning_modules.shared.base import NLI
from lightning_modules.shared.encoder import with_token_counts

ENTAILMENT, CONTRADICTION = 1, 0
NLIPair = tuple[str, str, int]
FORMATS = ("jsonl", "tsv", "triplet_csv", "pair_csv", "senteval")
_TEXT_LABELS = {"entailment": ENTAILMENT, "contradiction": CONTRADICTION, "neutral": None, "-": None, "": None}
_INT_LABELS = {"1": ENTAILMENT, "0": CONTRADICTION}
_SENTEVAL_NAME = re.compile(r"^(s1|s2|labels)\.(.+)$")
_EXPECTED = (
    "expected one of: jsonl with keys sentence1, sentence2, gold_label; a tab-separated .txt/.tsv "
    "with columns gold_label, sentence1, sentence2; a .csv with columns sent0, sent1, hard_neg "
    "(SimCSE triplets) or sentence1, sentence2, label|gold_label; or SentEval's s1.<split>, "
    "s2.<split>, labels.<split>"
)

# SNLI/MultiNLI sentences can exceed the csv module's default 128 KiB field limit in odd rows.
csv.field_size_limit(min(sys.maxsize, 2**31 - 1))


class NLIFormatError(DataConfigError):
    """An NLI file whose layout or labels cannot be read; the message names file, row and fix."""


# -- labels -------------------------------------------------------------------------------------
def parse_label(value: str, where: str, allow_int: bool = False) -> int | None:
    """Map a gold label to 1 (entailment), 0 (contradiction) or None (neutral / unlabeled)."""
    key = (value or "").strip().lower()
    if key in _TEXT_LABELS:
        return _TEXT_LABELS[key]
    if allow_int and key in _INT_LABELS:
        return _INT_LABELS[key]
    allowed = "entailment, contradiction, neutral, '-' or empty" + (", or the integers 1/0" if allow_int else "")
    hint = (
        " Integer labels here mean 1 = entailment, 0 = contradiction; convert Hugging Face's "
        "0/1/2 (entailment/neutral/contradiction) labels to text first."
        if allow_int
        else ""
    )
    raise NLIFormatError(f"{where}: unknown label '{value}'; allowed: {allowed}.{hint}")


# -- format detection ----------------------------------------------------------------------------
def _senteval_files(path: Path) -> dict[str, Path] | None:
    match = _SENTEVAL_NAME.match(path.name)
    if not match:
        return None
    split = match.group(2)
    return {part: path.with_name(f"{part}.{split}") for part in ("s1", "s2", "labels")}


def _header(path: Path, delimiter: str, encoding: str | None = None) -> list[str]:
    with text_io.decoding(path, encoding), open(path, newline="", encoding=text_io.reading_encoding(encoding)) as f:
        if delimiter == "\t":
            first = f.readline().rstrip("\r\n")
            return first.split("\t") if first else []
        return next(csv.reader(f), [])


def detect_format(path: str | Path, encoding: str | None = None) -> str:
    """Name of the layout of ``path`` (one of :data:`FORMATS`), from its name and header."""
    path = Path(path)
    if _senteval_files(path) is not None:
        return "senteval"
    if not path.exists():
        raise NLIFormatError(f"NLI file '{path}' does not exist; point `path` (or data_dir + file) at it.")
    suffix = path.suffix.lower()
    if suffix in (".jsonl", ".json"):
        return "jsonl"
    if suffix in (".txt", ".tsv"):
        columns = _header(path, "\t", encoding)
        if {"gold_label", "sentence1", "sentence2"} <= set(columns):
            return "tsv"
    elif suffix == ".csv":
        columns = _header(path, ",", encoding)
        if {"sent0", "sent1", "hard_neg"} <= set(columns):
            return "triplet_csv"
        if {"sentence1", "sentence2"} <= set(columns) and ({"label", "gold_label"} & set(columns)):
            return "pair_csv"
    else:
        raise NLIFormatError(f"NLI file '{path}': unknown extension '{suffix}'; {_EXPECTED}.")
    raise NLIFormatError(f"NLI file '{path}': header has columns {columns}; {_EXPECTED}.")


# -- readers (lazy, one record at a time) --------------------------------------------------------
def _read_jsonl(path: Path, encoding: str | None = None) -> Iterator[NLIPair]:
    with open(path, encoding=text_io.reading_encoding(encoding)) as f:
        for line_no, line in enumerate(f, start=1):
            if not line.strip():
                continue
            where = f"{path} line {line_no}"
            try:
                record = json.loads(line)
                s1, s2, gold = record["sentence1"], record["sentence2"], record.get("gold_label", "")
            except json.JSONDecodeError as err:
                raise NLIFormatError(f"{where}: not valid JSON ({err.msg}); each line must be one object.") from None
            except (KeyError, TypeError):
                keys = sorted(record) if isinstance(record, dict) else type(record).__name__
                raise NLIFormatError(f"{where}: keys {keys}; {_EXPECTED}.") from None
            y = parse_label(gold, where)
            if y is not None:
                yield s1, s2, y


def _read_tsv(path: Path, encoding: str | None = None) -> Iterator[NLIPair]:
    with open(path, encoding=text_io.reading_encoding(encoding), newline="") as f:
        columns = f.readline().rstrip("\r\n").split("\t")
        _check_columns(path, columns, [("gold_label",), ("sentence1",), ("sentence2",)])
        i_gold, i_s1, i_s2 = (columns.index(c) for c in ("gold_label", "sentence1", "sentence2"))
        needed = max(i_gold, i_s1, i_s2)
        # split on tabs ourselves: the release files contain bare quotes that csv would misread
        for line_no, line in enumerate(f, start=2):
            fields = line.rstrip("\r\n").split("\t")
            if len(fields) == 1 and not fields[0]:
                continue
            where = f"{path} line {line_no}"
            if len(fields) <= needed:
                raise NLIFormatError(f"{where}: {len(fields)} tab-separated fields, the header has {len(columns)}.")
            y = parse_label(fields[i_gold], where)
            if y is not None:
                yield fields[i_s1], fields[i_s2], y


def _check_columns(path: Path, columns: list[str], groups: list[tuple[str, ...]]) -> None:
    """Each group lists alternatives of which at least one column must be present."""
    if not all(set(group) & set(columns) for group in groups):
        raise NLIFormatError(f"NLI file '{path}': header has columns {columns}; {_EXPECTED}.")


def _csv_rows(path: Path, groups: list[tuple[str, ...]], encoding: str | None = None) -> Iterator[tuple[int, dict]]:
    with open(path, encoding=text_io.reading_encoding(encoding), newline="") as f:
        reader = csv.DictReader(f)
        _check_columns(path, list(reader.fieldnames or []), groups)
        for row in reader:
            yield reader.line_num, row


def _read_triplet_csv(path: Path, encoding: str | None = None) -> Iterator[NLIPair]:
    for line_no, row in _csv_rows(path, [("sent0",), ("sent1",), ("hard_neg",)], encoding):
        if None in row.values():
            raise NLIFormatError(f"{path} line {line_no}: fewer fields than the header sent0,sent1,hard_neg.")
        yield row["sent0"], row["sent1"], ENTAILMENT
        yield row["sent0"], row["hard_neg"], CONTRADICTION


def _read_pair_csv(path: Path, encoding: str | None = None) -> Iterator[NLIPair]:
    label_column = None
    for line_no, row in _csv_rows(path, [("sentence1",), ("sentence2",), ("label", "gold_label")], encoding):
        if label_column is None:
            label_column = "label" if "label" in row else "gold_label"
        where = f"{path} line {line_no} column '{label_column}'"
        if row[label_column] is None or row["sentence2"] is None:
            raise NLIFormatError(f"{path} line {line_no}: fewer fields than the header.")
        y = parse_label(row[label_column], where, allow_int=True)
        if y is not None:
            yield row["sentence1"], row["sentence2"], y


def _read_senteval(path: Path, encoding: str | None = None) -> Iterator[NLIPair]:
    files = _senteval_files(path)
    missing = [str(p) for p in files.values() if not p.exists()]
    if missing:
        raise NLIFormatError(f"SentEval NLI layout of '{path}' needs s1/s2/labels files; missing {missing}.")
    handles = [open(files[k], encoding=text_io.reading_encoding(encoding)) for k in ("s1", "s2", "labels")]
    try:
        line_no = 0
        while True:
            lines = [h.readline() for h in handles]
            line_no += 1
            ended = [not line for line in lines]
            if all(ended):
                return
            if any(ended):
                short = [str(files[k]) for k, e in zip(("s1", "s2", "labels"), ended) if e]
                raise NLIFormatError(f"{short} end at line {line_no} before the other SentEval files.")
            s1, s2, gold = (line.rstrip("\r\n") for line in lines)
            y = parse_label(gold, f"{files['labels']} line {line_no}")
            if y is not None:
                yield s1, s2, y
    finally:
        for h in handles:
            h.close()


_READERS: dict[str, Callable[[Path, str | None], Iterator[NLIPair]]] = {
    "jsonl": _read_jsonl,
    "tsv": _read_tsv,
    "triplet_csv": _read_triplet_csv,
    "pair_csv": _read_pair_csv,
    "senteval": _read_senteval,
}


def iter_pairs(path: str | Path, fmt: str | None = None, encoding: str | None = None) -> Iterator[NLIPair]:
    """Lazily yield (sentence1, sentence2, y) from ``path``; neutral and unlabeled pairs dropped.

    A byte that is not valid in ``encoding`` (UTF-8 by default) raises
    :class:`datamodules.text_io.TextDecodeError` naming the file and its line.
    """
    path = Path(path)
    fmt = fmt or detect_format(path, encoding)
    if fmt not in _READERS:
        raise NLIFormatError(f"NLI format '{fmt}' for '{path}' is not one of {FORMATS}.")
    return _decode_guard(_READERS[fmt](path, encoding), path, fmt, encoding)


def _decode_guard(pairs: Iterator[NLIPair], path: Path, fmt: str, encoding: str | None) -> Iterator[NLIPair]:
    try:
        yield from pairs
    except UnicodeError as err:  # also a codec's own check (UTF-16 without a byte-order mark)
        files = list(_senteval_files(path).values()) if fmt == "senteval" else [path]
        bad = next((f for f in files if text_io.locate_decode_error(f, encoding) is not None), path)
        raise text_io.decode_error(bad, encoding, "dataset.encoding", err) from None


def read_pairs(path: str | Path, fmt: str | None = None, encoding: str | None = None) -> list[NLIPair]:
    return list(iter_pairs(path, fmt, encoding))


def count_pairs(path: str | Path, fmt: str | None = None, encoding: str | None = None) -> int:
    return sum(1 for _ in iter_pairs(path, fmt, encoding))


def has_pairs(path: str | Path, fmt: str | None = None, encoding: str | None = None) -> bool:
    """Whether ``path`` holds at least one entailment or contradiction pair (stops at the first)."""
    return next(iter(iter_pairs(path, fmt, encoding)), None) is not None


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
        return with_token_counts(
            self.tokenizer(texts, padding="longest", truncation=True, max_length=self.max_length, return_tensors="pt")
        )

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
        num_workers: int = 0,
        seed: int = 0,
        drop_last: bool = False,
        equalize_ranks: bool = True,
        encoding: str = text_io.DEFAULT_ENCODING,
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
        self.num_workers = int(num_workers or 0)
        # run.py sets these for the run's device (conf/config.yaml `loader`); a streamed file never keeps workers
        self.pin_memory, self.persistent_workers, self.prefetch_factor = False, False, None
        self.seed = seed
        self.drop_last = drop_last
        self.equalize_ranks = equalize_ranks
        self.encoding = text_io.check_encoding(encoding)
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
                **loader_options(self.num_workers, self.pin_memory, self.persistent_workers, self.prefetch_factor),
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
            **loader_options(self.num_workers, self.pin_memory, False, self.prefetch_factor),
            epoch_source=self._epoch,
            rank_source=self._rank_world,
        )
