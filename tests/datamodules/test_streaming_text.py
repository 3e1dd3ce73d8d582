"""Streaming one-sentence-per-line dataset: sharding, shuffling, epochs, memory, errors, batches."""

from __future__ import annotations

import tracemalloc
from collections import Counter
from pathlib import Path

import pytest
from torch.utils.data import DataLoader

from datamodules.streaming import EpochAwareLoader
from datamodules.streaming_text import StreamingTextDataModule, StreamingTextDataset
from tests.helpers.recording import seen_per_epoch
from tests.helpers.speed import LOADER
from textcore.errors import UserError


def write_lines(path: Path, lines: list[str], newline: str = "\n") -> Path:
    path.write_text(newline.join(lines) + newline, encoding="utf-8")
    return path


def sentences(n: int) -> list[str]:
    return [f"sentence number {i} about something" for i in range(n)]


@pytest.fixture
def hundred(tmp_path) -> tuple[Path, list[str]]:
    """100 sentences with empty and blank lines mixed in."""
    texts = sentences(100)
    lines = []
    for i, text in enumerate(texts):
        lines.append(text)
        if i % 17 == 0:
            lines += ["", "   \t "]
    return write_lines(tmp_path / "corpus.txt", lines), texts


def collect(path, world_size=2, num_workers=2, **kwargs) -> dict[tuple[int, int], list[str]]:
    out = {}
    for rank in range(world_size):
        ds = StreamingTextDataset(path, rank=rank, world_size=world_size, **kwargs)
        for worker in range(num_workers):
            out[rank, worker] = list(ds.iter_shard(worker, num_workers))
    return out


def test_every_line_exactly_once_across_2_workers_x_2_ranks(hundred):
    path, texts = hundred
    shards = collect(path, buffer_size=8, seed=3)
    counts = Counter(t for shard in shards.values() for t in shard)
    assert counts == Counter(texts)  # each non-empty line once, empty/blank lines skipped
    for (rank, worker), shard in shards.items():
        # j-th non-empty line -> rank j mod 2, worker (j // 2) mod 2
        expected = {texts[j] for j in range(100) if j % 2 == rank and (j // 2) % 2 == worker}
        assert set(shard) == expected, (rank, worker)


def test_even_shards_drop_only_the_incomplete_last_round(tmp_path):
    texts = sentences(103)
    path = write_lines(tmp_path / "odd.txt", texts)
    even = collect(path, world_size=2, num_workers=2, buffer_size=1)
    per_rank = [even[r, 0] + even[r, 1] for r in range(2)]
    assert [len(r) for r in per_rank] == [51, 51]  # 103 = 2 * 51 + 1: the last line is dropped
    assert Counter(per_rank[0] + per_rank[1]) == Counter(texts[:102])
    assert len(StreamingTextDataset(path, rank=1, world_size=2)) == 51

    uneven = collect(path, world_size=2, num_workers=2, buffer_size=1, even_shards=False)
    assert Counter(t for shard in uneven.values() for t in shard) == Counter(texts)
    assert len(StreamingTextDataset(path, rank=0, world_size=2, even_shards=False)) == 52
    assert len(StreamingTextDataset(path, rank=1, world_size=2, even_shards=False)) == 51


def test_real_dataloader_two_workers_each_rank_len_matches(hundred):
    path, texts = hundred
    seen = []
    for rank in range(2):
        ds = StreamingTextDataset(path, buffer_size=10, rank=rank, world_size=2)
        loader = EpochAwareLoader(ds, batch_size=10, num_workers=2, collate_fn=list)
        batches = list(loader)
        # 50 texts per rank, 25 per worker: 3 batches from each worker (10+10+5), 6 in all,
        # where DataLoader's own estimate ceil(50 / 10) = 5 would make Lightning stop early.
        assert len(loader) == len(batches) == 6
        seen += [t for batch in batches for t in batch]
    assert Counter(seen) == Counter(texts)


def test_shuffle_differs_between_epochs_and_is_reproducible(hundred):
    path, texts = hundred
    ds = StreamingTextDataset(path, buffer_size=30, seed=7)
    epoch0 = list(ds)
    ds.set_epoch(1)
    epoch1 = list(ds)
    assert sorted(epoch0) == sorted(epoch1) == sorted(texts)
    assert epoch0 != texts and epoch1 != epoch0

    again = StreamingTextDataset(path, buffer_size=30, seed=7)
    assert list(again) == epoch0
    again.set_epoch(1)
    assert list(again) == epoch1
    assert list(StreamingTextDataset(path, buffer_size=30, seed=8)) != epoch0
    assert list(StreamingTextDataset(path, buffer_size=1)) == texts  # no buffer: file order


def test_lightning_set_epoch_reaches_persistent_workers(hundred):
    from lightning.fabric.utilities.data import _set_sampler_epoch

    path, _ = hundred
    ds = StreamingTextDataset(path, buffer_size=20, seed=1)
    loader = EpochAwareLoader(ds, batch_size=10, num_workers=2, collate_fn=list, persistent_workers=True)
    _set_sampler_epoch(loader, 0)  # the call Lightning's fit loop makes at each epoch start
    epoch0 = list(loader)
    _set_sampler_epoch(loader, 1)
    assert ds.epoch == 1
    epoch1 = list(loader)
    assert epoch1 != epoch0
    fresh = StreamingTextDataset(path, buffer_size=20, seed=1)
    fresh.set_epoch(1)
    assert list(DataLoader(fresh, batch_size=10, num_workers=2, collate_fn=list)) == epoch1


def _peak_bytes(path: Path) -> int:
    ds = StreamingTextDataset(path, buffer_size=200, seed=0)
    tracemalloc.start()
    n = len(ds)
    m = sum(1 for _ in ds)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert n == m
    return peak


def test_memory_does_not_grow_with_file_size(tmp_path):
    small = write_lines(tmp_path / "small.txt", sentences(1_500))
    large = write_lines(tmp_path / "large.txt", sentences(30_000))  # 20x the lines
    small_peak, large_peak = _peak_bytes(small), _peak_bytes(large)
    # Holding the file would cost at least its size (~1.1 MB); the stream keeps ~200 lines.
    assert large_peak < 1.5 * small_peak + 32_000
    assert large_peak < large.stat().st_size / 10


def test_missing_and_empty_files_are_clear_errors(tmp_path):
    missing = tmp_path / "nowhere" / "wiki1m.txt"
    with pytest.raises(FileNotFoundError, match=r"nowhere/wiki1m\.txt.*data_dir"):
        StreamingTextDataModule(missing, tokenizer=object(), loader=LOADER)
    with pytest.raises(FileNotFoundError, match="data_dir"):
        StreamingTextDataset(missing)
    empty = tmp_path / "empty.txt"
    empty.write_text("")
    blank = write_lines(tmp_path / "blank.txt", ["", "  ", "\t"])
    for path in (empty, blank):
        with pytest.raises(ValueError, match=f"{path.name} is empty"):
            StreamingTextDataModule(path, tokenizer=object(), loader=LOADER)
    with pytest.raises(UserError, match="is a folder; set dataset.path"):
        StreamingTextDataset(tmp_path)
    with pytest.raises(ValueError, match="rank"):
        StreamingTextDataset(write_lines(tmp_path / "ok.txt", ["a"]), rank=2, world_size=2)


def test_crlf_and_surrounding_whitespace_are_stripped(tmp_path):
    path = write_lines(tmp_path / "crlf.txt", ["  first one ", "second\t", "", "third"], newline="\r\n")
    assert list(StreamingTextDataset(path, buffer_size=0)) == ["first one", "second", "third"]


def test_datamodule_batches_pad_to_longest_and_keep_texts(tmp_path):
    from textcore.encoding.backbone import load_tokenizer

    tokenizer = load_tokenizer("minilm")
    texts = ["a cat", "a much longer sentence about cats and dogs and birds and more", "dogs bark", "hi"]
    path = write_lines(tmp_path / "four.txt", texts)
    dm = StreamingTextDataModule(path, batch_size=4, max_length=8, buffer_size=0, tokenizer=tokenizer, loader=LOADER)
    (batch,) = list(dm.train_dataloader())
    assert batch["texts"] == texts
    lengths = [len(tokenizer(t, truncation=True, max_length=8)["input_ids"]) for t in texts]
    assert max(lengths) == 8 and min(lengths) < 8  # one text is truncated, others are padded
    assert batch["input_ids"].shape == (4, 8)
    assert batch["attention_mask"].sum(1).tolist() == lengths
    assert batch["token_counts"] == lengths  # made on the host: the encoder plans its chunks without a GPU read
    assert set(batch) <= {"input_ids", "attention_mask", "token_type_ids", "texts", "token_counts"}

    short = StreamingTextDataModule(path, batch_size=2, max_length=32, buffer_size=0, tokenizer_name="minilm",
                                    loader=LOADER)
    first = next(iter(short.train_dataloader()))
    assert first["texts"] == texts[:2]
    assert first["input_ids"].shape == (2, max(len(tokenizer(t)["input_ids"]) for t in texts[:2]))


@pytest.mark.slow
def test_trainer_two_epochs_two_workers_sees_every_line_in_new_order(tmp_path):
    """A real Trainer: Lightning's epoch reaches the dataset and no worker's last batch is cut."""
    texts = sentences(203)  # 102 + 101 per worker: 7 + 7 batches of 16, DataLoader's guess is 13
    path = write_lines(tmp_path / "c.txt", texts)
    dm = StreamingTextDataModule(path, batch_size=16, buffer_size=50, tokenizer_name="minilm",
                                 loader={**LOADER, "num_workers": 2})
    seen, trainer = seen_per_epoch(dm, lambda batch: batch["texts"])
    assert trainer.num_training_batches == 14
    assert Counter(seen[0]) == Counter(texts) == Counter(seen[1])
    assert seen[0] != seen[1]


def test_shuffle_buffer_permutes_within_reach_of_the_buffer():
    import random

    from datamodules.streaming import shuffle_buffer

    items = list(range(200))
    out = list(shuffle_buffer(iter(items), 10, random.Random(0)))
    assert sorted(out) == items and out != items
    # the k-th output was read by the time 10 + k items were consumed
    assert all(x < 10 + k for k, x in enumerate(out))
    assert out == list(shuffle_buffer(iter(items), 10, random.Random(0)))
