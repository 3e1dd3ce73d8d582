"""Short-text clustering corpora from CSV/TSV (docs/methods/sccl.md, docs/methods/aecl.md, docs/evaluation.md).

Each training item is an original text and two views of it:
- ``explicit`` augmentation: views from augmentation columns; with one column the views are
  the original text and its augmentation, with two or more the first two columns;
- ``virtual`` augmentation: the original text twice, so dropout is the only difference.

Tokenisation happens in the collate function and pads to the longest text of the batch,
not to ``max_length``: short texts then cost short sequences.
"""
from __future__ import annotations

from pathlib import Path
from typing import Mapping, Sequence

import lightning as L
import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset, Sampler

from datamodules import table_reader, text_decoding
from datamodules.loader_options import LoaderSettings
from datamodules.resume import ResumableData, ResumableSampler
from datamodules.short_text_corpus import ShortTextCorpus, load_corpus
from datamodules.tokenizer import LazyTokenizer
from textcore.data_kinds import SHORT_TEXT
from textcore.encoding.token_batches import token_lengths, tokenize_batch
from textcore.errors import DataConfigError

AUGMENTATIONS = ("explicit", "virtual")


class ShortTextTrainSet(Dataset):
    def __init__(self, corpus: ShortTextCorpus, augmentation: str):
        self.corpus = corpus
        self.augmentation = augmentation

    def __len__(self) -> int:
        return len(self.corpus)

    def __getitem__(self, i: int) -> dict:
        text = self.corpus.texts[i]
        augs = self.corpus.augmentations
        if self.augmentation == "virtual" or not augs:
            views = (text, text)
        elif len(augs) == 1:
            views = (text, augs[0][i])
        else:
            views = (augs[0][i], augs[1][i])
        return {"index": i, "text": text, "view1": views[0], "view2": views[1]}


# A permutation drawn from ``seed + epoch`` (and sharded over DDP ranks): a resumed run sees the
# batches an uninterrupted one would (datamodules/resume.py).
EpochShuffleSampler = ResumableSampler


class TextCollator:
    """Tokenises the original text and both views; pads to the batch's longest text."""

    def __init__(self, tokenizer, max_length: int = 32, pad_to_max: bool = False, views: bool = True):
        self.tokenizer = tokenizer
        self.max_length = max_length
        self.pad_to_max = pad_to_max
        self.views = views

    def tokenize(self, texts: list[str]) -> dict:
        # the token counts travel as a list: the encoder plans its calls without reading the GPU
        return tokenize_batch(self.tokenizer, texts, self.max_length, self.pad_to_max)

    def __call__(self, items: list[dict]) -> dict:
        batch = {"index": torch.tensor([it["index"] for it in items]), "text": [it["text"] for it in items]}
        if not self.views:
            batch["original"] = self.tokenize(batch["text"])
            return batch
        view1 = [it["view1"] for it in items]
        batch["view1"] = self.tokenize(view1)
        batch["view2"] = self.tokenize([it["view2"] for it in items])
        if view1 != batch["text"]:  # the original needs its own forward pass only when no view is it
            batch["original"] = self.tokenize(batch["text"])
        return batch


class _IndexSet(Dataset):
    """The texts of ``rows`` (every text when None) by position: item ``i`` is text ``rows[i]`` and carries
    ``index`` = i, its position in the evaluation's outputs."""

    def __init__(self, texts: Sequence[str], rows: np.ndarray | None = None):
        self.texts = texts
        self.rows = rows

    def __len__(self) -> int:
        return len(self.texts) if self.rows is None else len(self.rows)

    def __getitem__(self, i: int) -> dict:
        return {"index": i, "text": self.texts[i if self.rows is None else int(self.rows[i])]}


class EvalBatches:
    """Evaluation batches cut from one order of positions (``order[s:s + size]``): a list-like sampler of index
    lists that keeps a million rows as one array, not a million Python lists."""

    def __init__(self, order: np.ndarray, size: int, tokens: int | None = None):
        self.order = np.asarray(order, dtype=np.int64)
        self.size = int(size)
        self.tokens = tokens  # the texts' tokens in all, when counted: a pass's progress by the work left

    def __len__(self) -> int:
        return -(-len(self.order) // self.size)

    def __getitem__(self, b: int) -> list[int]:
        if not -len(self) <= b < len(self):
            raise IndexError(b)
        b %= len(self)
        return self.order[b * self.size:(b + 1) * self.size].tolist()

    def __iter__(self):
        return (self[b] for b in range(len(self)))


class LengthGroupedBatchSampler(Sampler[list[int]]):
    """Training batches of rows of similar length, drawn from an epoch-seeded shuffle (opt-in).

    The inner ``sampler`` (an :class:`EpochShuffleSampler`) gives the epoch's permutation; it is
    cut into windows of ``group * batch_size`` rows, each window is sorted by ``lengths`` and cut
    into batches, and the epoch's batches are shuffled with the same seed. Every row is used once
    per epoch, and padding to the longest text of a batch then pads little. The price: in-batch
    negatives tend to have similar lengths, which changes the contrastive task slightly. This is
    why it is off by default (``dataset.length_grouping=0``). Lightning calls ``set_epoch`` on
    ``batch_sampler.sampler``, so a resumed run sees the same batches.
    """

    def __init__(self, sampler: "EpochShuffleSampler", lengths: Sequence[int], batch_size: int, group: int,
                 drop_last: bool = False):
        if group < 1 or batch_size < 1:
            raise ValueError(f"length grouping needs group >= 1 and batch_size >= 1, got {group}, {batch_size}")
        if len(lengths) != len(sampler):
            raise ValueError(f"{len(lengths)} lengths for {len(sampler)} rows")
        self.sampler = sampler
        self.lengths = list(lengths)
        self.batch_size = batch_size
        self.group = group
        self.drop_last = drop_last

    def __len__(self) -> int:
        n = len(self.sampler)
        return n // self.batch_size if self.drop_last else -(-n // self.batch_size)

    def resume(self, epoch: int, skip_batches: int) -> None:
        """Start at ``epoch`` and leave out its first ``skip_batches`` batches (a resumed run)."""
        self.sampler.set_epoch(epoch)
        self._skip = (int(epoch), int(skip_batches)) if skip_batches > 0 else None

    def __iter__(self):
        order = self.sampler.epoch_indices()
        window = self.group * self.batch_size
        batches = []
        for start in range(0, len(order), window):
            rows = sorted(order[start : start + window], key=lambda i: self.lengths[i])
            batches += [rows[s : s + self.batch_size] for s in range(0, len(rows), self.batch_size)]
        if self.drop_last:
            # only the epoch's last window can hold a short batch
            batches = [b for b in batches if len(b) == self.batch_size]
        generator = torch.Generator().manual_seed(self.sampler.seed + self.sampler.epoch)
        batches = [batches[i] for i in torch.randperm(len(batches), generator=generator).tolist()]
        skip = getattr(self, "_skip", None)
        return iter(batches[skip[1]:] if skip is not None and skip[0] == self.sampler.epoch else batches)


class ShortTextDataModule(LazyTokenizer, ResumableData, L.LightningDataModule):
    """Short-text clustering corpus for SCCL/AECL and the KMeans baselines.

    Args:
        data_dir / file: where the CSV/TSV is (``.tsv`` is read tab-separated).
        text_column, label_column, aug_columns: column names; ``label_column=None`` or a file
            without that column trains without labels.
        augmentation: ``explicit`` (views from ``aug_columns``) or ``virtual`` (text twice).
        num_clusters: K; ``None`` takes the number of distinct labels.
        eval_sort_by_length: the evaluation loader groups texts of similar length.
        eval_shuffle_seed: with ``eval_sort_by_length=false``, the evaluation batches follow one fixed random
            permutation of the texts drawn with this seed (the AECL authors' evaluation: a shuffled loader,
            batches of 400), instead of the file order. It matters for a head whose prediction depends on
            the other texts of its batch (AECL's sample-level attention); embeddings do not depend on it.
        length_grouping: 0 (default) draws training batches at random; G > 0 groups rows of similar
            token length within windows of G batches (:class:`LengthGroupedBatchSampler`):
            faster on CPU, but it changes which negatives share a batch. Single process only.
        encoding: the file's text encoding (``dataset.encoding``; UTF-8 by default, a BOM is skipped).
    """

    data_kind = SHORT_TEXT  # what it yields; methods declare the kinds they train on (trains_on)

    def __init__(
        self,
        data_dir: str = ".",
        file: str = "data.csv",
        name: str | None = None,
        text_column: str = "text",
        label_column: str | None = "label",
        aug_columns: Sequence[str] = (),
        augmentation: str = "explicit",
        num_clusters: int | None = None,
        tokenizer: str = "minilm",
        max_length: int = 32,
        batch_size: int = 64,
        eval_batch_size: int = 256,
        pad_to_max: bool = False,
        eval_sort_by_length: bool = True,
        eval_shuffle_seed: int | None = None,
        length_grouping: int = 0,
        drop_last: bool = False,
        seed: int = 0,
        encoding: str = text_decoding.DEFAULT_ENCODING,
        hub_dataset: str | None = None,
        split: str = "train",
        subset: str | None = None,
        *,
        loader: LoaderSettings | Mapping,
    ):
        super().__init__()
        if augmentation not in AUGMENTATIONS:
            raise DataConfigError(f"dataset.augmentation must be one of {AUGMENTATIONS}, got '{augmentation}'")
        if augmentation == "explicit" and not aug_columns:
            raise DataConfigError(
                "dataset.augmentation=explicit needs at least one column in dataset.aug_columns; "
                "use dataset.augmentation=virtual for dropout-only views."
            )
        self.path = Path(data_dir) / file
        self.name = name or Path(file).stem
        # a Hub dataset is read once (datasets library) into a Parquet file at ``path``, then read like any file
        self.hub = (hub_dataset, split, subset) if hub_dataset else None
        self.text_column = text_column
        self.label_column = label_column
        self.aug_columns = list(aug_columns) if augmentation == "explicit" else []
        self.augmentation = augmentation
        self.requested_clusters = num_clusters
        self.tokenizer_spec = tokenizer
        self.max_length = max_length
        self.batch_size = batch_size
        self.eval_batch_size = eval_batch_size
        self.loader = LoaderSettings.of(loader)
        self.pad_to_max = pad_to_max
        self.eval_sort_by_length = eval_sort_by_length
        if eval_shuffle_seed is not None and eval_sort_by_length:
            raise DataConfigError("dataset.eval_shuffle_seed orders the evaluation batches at random; it needs "
                                  "dataset.eval_sort_by_length=false (length-sorted batches have their own order).")
        self.eval_shuffle_seed = eval_shuffle_seed
        self.drop_last = drop_last
        self.seed = seed
        self.encoding = text_decoding.check_encoding(encoding)
        self.corpus: ShortTextCorpus | None = None
        if length_grouping < 0:
            raise DataConfigError(f"dataset.length_grouping must be >= 0 (0 = off), got {length_grouping}")
        self.length_grouping = int(length_grouping)
        self._eval_lengths: np.ndarray | None = None  # token count of each text (-1: not counted yet)

    # -- set-up ---------------------------------------------------------------
    def setup(self, stage: str | None = None) -> None:
        if self.corpus is not None:
            return
        if self.hub is not None and not self.path.is_file():
            self.path.parent.mkdir(parents=True, exist_ok=True)
            table_reader.read_hub_dataset(*self.hub).to_parquet(self.path)
        corpus = load_corpus(self.path, self.text_column, self.label_column, self.aug_columns, self.encoding)
        self.corpus = corpus
        if self.requested_clusters == "auto":
            return  # ctclust.training.auto_clusters sets requested_clusters from the texts, before K is used
        k = self.num_clusters_for(corpus)
        distinct = len(set(corpus.texts))
        if k > distinct:
            raise DataConfigError(
                f"{k} clusters requested (dataset.num_clusters) but '{self.path}' has only {distinct} "
                "distinct texts; lower dataset.num_clusters or use a larger file."
            )

    def num_clusters_for(self, corpus: ShortTextCorpus) -> int:
        if self.requested_clusters == "auto":
            raise DataConfigError("dataset.num_clusters=auto is resolved by run.py before training "
                                  "(evaluation.clustering.choose_k); outside run.py, choose K with "
                                  "`python tools.py choose-k` "
                                  "and set it.")
        if self.requested_clusters is not None:
            if int(self.requested_clusters) < 2:
                raise DataConfigError(
                    f"dataset.num_clusters={self.requested_clusters}: clustering needs at least 2 clusters "
                    "(with 1 the clustering loss is identically 0); set dataset.num_clusters=<K> with K >= 2."
                )
            return int(self.requested_clusters)
        if corpus.labels is None:
            raise DataConfigError(
                f"'{self.path}' has no label column, so the number of clusters cannot be inferred: "
                "set dataset.num_clusters=<K>."
            )
        k = int(len(np.unique(corpus.labels)))
        if k < 2:
            raise DataConfigError(
                f"'{self.path}' has a single label in column '{self.label_column}', so dataset.num_clusters=null "
                "infers K=1; set dataset.num_clusters=<K> with K >= 2."
            )
        return k

    @property
    def num_clusters(self) -> int:
        self.setup()
        return self.num_clusters_for(self.corpus)

    @property
    def texts(self) -> list[str]:
        self.setup()
        return self.corpus.texts

    @property
    def labels(self) -> np.ndarray | None:
        self.setup()
        return self.corpus.labels

    @property
    def lines(self) -> list[int]:
        """File line (1-based, header = 1) of each text, in the order of ``texts``."""
        self.setup()
        return self.corpus.lines

    # -- loaders ----------------------------------------------------------------
    def train_dataloader(self) -> DataLoader:
        self.setup()
        dataset = ShortTextTrainSet(self.corpus, self.augmentation)
        trainer = getattr(self, "trainer", None)
        rank, world = (trainer.global_rank, trainer.world_size) if trainer is not None else (0, 1)
        sampler = EpochShuffleSampler(len(self.corpus), self.seed, rank, world)
        position = self.resume_position()  # (epoch, batches done) when resuming from a checkpoint
        # its own generator: creating the iterator must not draw from the global RNG (exact resume)
        generator = torch.Generator().manual_seed(self.seed)
        collate = TextCollator(self.tokenizer, self.max_length, self.pad_to_max)
        if self.length_grouping:
            trainer = getattr(self, "trainer", None)
            if trainer is not None and trainer.world_size > 1:
                raise DataConfigError(
                    "dataset.length_grouping works in a single process only; set dataset.length_grouping=0 for DDP."
                )
            views = [dataset[i] for i in range(len(dataset))]
            longest = [max(a, b) for a, b in zip(
                token_lengths(self.tokenizer, [v["view1"] for v in views], self.max_length),
                token_lengths(self.tokenizer, [v["view2"] for v in views], self.max_length),
            )]
            batches = LengthGroupedBatchSampler(sampler, longest, self.batch_size, self.length_grouping, self.drop_last)
            if position is not None:
                batches.resume(*position)
            return DataLoader(dataset, batch_sampler=batches, collate_fn=collate, generator=generator,
                              **self._loader_options())
        if position is not None:
            sampler.resume(position[0], position[1] * self.batch_size)
        return DataLoader(
            dataset,
            batch_size=self.batch_size,
            sampler=sampler,
            drop_last=self.drop_last,
            collate_fn=collate,
            generator=generator,
            **self._loader_options(),
        )

    def _loader_options(self) -> dict:
        # the sampler runs in the training process, so workers kept between epochs see every epoch's order
        return self.loader.dataloader_kwargs()

    def eval_dataloader(self, batch_size: int | None = None, rows: np.ndarray | None = None) -> DataLoader:
        """The texts of ``rows`` (sorted row numbers; every text when None) once, in a fixed order; each batch
        carries ``index``, the texts' positions among ``rows``. Length-sorted batches come from each text's token
        count, counted once per text and run (:meth:`eval_token_counts`); the texts are tokenised batch by batch
        as they are embedded."""
        self.setup()
        size = batch_size or self.eval_batch_size
        texts = self.corpus.texts
        count = len(texts) if rows is None else len(rows)
        tokens = None
        if self.eval_sort_by_length:
            lengths = self.eval_token_counts(rows)
            order = np.lexsort((np.arange(count), lengths))  # by token count, then position
            tokens = int(lengths.sum())
        elif self.eval_shuffle_seed is not None:
            order = np.random.default_rng(self.eval_shuffle_seed).permutation(count)
        else:
            order = np.arange(count)
        return DataLoader(
            _IndexSet(texts, rows),
            batch_sampler=EvalBatches(order, size, tokens),
            num_workers=self.loader.num_workers,
            pin_memory=self.loader.pin_memory,
            collate_fn=TextCollator(self.tokenizer, self.max_length, self.pad_to_max, views=False),
        )

    def eval_token_counts(self, rows: np.ndarray | None = None) -> np.ndarray:
        """Token counts [len(rows)] of the texts of ``rows`` (all when None), each text counted once per run: the
        evaluations of a sample count the sample, the last evaluation the rest."""
        texts = self.corpus.texts
        if self._eval_lengths is None:
            self._eval_lengths = np.full(len(texts), -1, dtype=np.int32)
        wanted = np.arange(len(texts)) if rows is None else np.asarray(rows, dtype=np.int64)
        missing = wanted[self._eval_lengths[wanted] < 0]
        if len(missing):
            self._eval_lengths[missing] = token_lengths(self.tokenizer, _Rows(texts, missing), self.max_length)
        return self._eval_lengths[wanted]


class _Rows:
    """``texts[rows[i]]`` by position, without copying the texts."""

    def __init__(self, texts: Sequence[str], rows: np.ndarray):
        self.texts, self.rows = texts, rows

    def __len__(self) -> int:
        return len(self.rows)

    def __getitem__(self, i: int) -> str:
        return self.texts[int(self.rows[i])]
