"""NLI readers, streaming shards and the PairSupCon data module (datamodules/nli.py)."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

import datamodules.nli as nli
from datamodules.nli import NLIDataModule, StreamingNLIDataset
from datamodules.nli_files import NLIFormatError, count_pairs, detect_format, read_pairs
from datamodules.streaming import EpochAwareLoader
from tests.helpers.recording import seen_per_epoch
from tests.helpers.speed import LOADER

# gold labels as in the SNLI release: '-' marks pairs without annotator consensus
ROWS = [
    ("A man plays guitar .", "A person makes music .", "entailment"),
    ("A man plays guitar .", "A man sleeps .", "contradiction"),
    ("A man plays guitar .", "The man is famous .", "neutral"),
    ("Two dogs run .", "Animals move .", "-"),
    ("Two dogs run .", 'The dogs are "still" .', "contradiction"),
    ("Kids eat .", "Children are eating .", "entailment"),
]
EXPECTED = [
    ("A man plays guitar .", "A person makes music .", 1),
    ("A man plays guitar .", "A man sleeps .", 0),
    ("Two dogs run .", 'The dogs are "still" .', 0),
    ("Kids eat .", "Children are eating .", 1),
]


def write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


def test_jsonl_reader_drops_neutral_and_unlabeled(tmp_path):
    lines = [
        json.dumps({"gold_label": g, "sentence1": a, "sentence2": b, "pairID": str(i)})
        for i, (a, b, g) in enumerate(ROWS)
    ]
    lines.insert(2, json.dumps({"gold_label": "", "sentence1": "x", "sentence2": "y"}))
    path = write(tmp_path / "snli_1.0_dev.jsonl", "\n".join(lines) + "\n")
    assert detect_format(path) == "jsonl"
    assert read_pairs(path) == EXPECTED


def test_tsv_release_reader_uses_named_columns_and_keeps_quotes(tmp_path):
    header = "gold_label\tsentence1_binary_parse\tsentence2_binary_parse\tsentence1\tsentence2\tpairID"
    body = [f"{g}\t( x )\t( y )\t{a}\t{b}\t{i}" for i, (a, b, g) in enumerate(ROWS)]
    path = write(tmp_path / "multinli_1.0_dev_matched.txt", "\n".join([header, *body]) + "\n")
    assert detect_format(path) == "tsv"
    assert read_pairs(path) == EXPECTED


def test_triplet_csv_gives_entailment_and_hard_negative_pair(tmp_path):
    path = write(
        tmp_path / "nli_for_simcse.csv",
        'sent0,sent1,hard_neg\nP one .,H one .,N one .\n"P, two .",H two .,N two .\n',
    )
    assert detect_format(path) == "triplet_csv"
    assert read_pairs(path) == [
        ("P one .", "H one .", 1),
        ("P one .", "N one .", 0),
        ("P, two .", "H two .", 1),
        ("P, two .", "N two .", 0),
    ]


def test_pair_csv_text_labels_and_gold_label_column(tmp_path):
    body = "".join(f'"{a}","{b.replace(chr(34), chr(34) * 2)}",{g},dev\n' for a, b, g in ROWS)
    path = write(tmp_path / "sample.csv", "sentence1,sentence2,gold_label,split\n" + body)
    assert detect_format(path) == "pair_csv"
    assert read_pairs(path) == EXPECTED


def test_pair_csv_integer_labels_mean_one_entailment_zero_contradiction(tmp_path):
    path = write(tmp_path / "ints.csv", "sentence1,sentence2,label\na,b,1\nc,d,0\ne,f,NEUTRAL\ng,h,Entailment\n")
    assert read_pairs(path) == [("a", "b", 1), ("c", "d", 0), ("g", "h", 1)]


def test_pair_csv_rejects_huggingface_label_2_with_row_and_convention(tmp_path):
    path = write(tmp_path / "hf.csv", "sentence1,sentence2,label\na,b,0\nc,d,2\n")
    with pytest.raises(NLIFormatError, match=r"hf\.csv line 3 column 'label'.*'2'.*1 = entailment, 0 = contradiction"):
        read_pairs(path)


def test_senteval_layout(tmp_path):
    write(tmp_path / "s1.dev", "".join(a + "\n" for a, _, _ in ROWS))
    write(tmp_path / "s2.dev", "".join(b + "\n" for _, b, _ in ROWS))
    write(tmp_path / "labels.dev", "".join(g + "\n" for _, _, g in ROWS))
    assert detect_format(tmp_path / "labels.dev") == "senteval"
    assert read_pairs(tmp_path / "s1.dev") == EXPECTED


def test_senteval_layout_with_unequal_files_fails(tmp_path):
    write(tmp_path / "s1.dev", "a\nb\n")
    write(tmp_path / "s2.dev", "c\n")
    write(tmp_path / "labels.dev", "entailment\nentailment\n")
    with pytest.raises(NLIFormatError, match=r"s2\.dev.*line 2"):
        read_pairs(tmp_path / "s1.dev")


def test_bad_header_error_names_file_columns_and_expected(tmp_path):
    path = write(tmp_path / "weird.csv", "premise,hypothesis,label\na,b,1\n")
    with pytest.raises(NLIFormatError) as err:
        read_pairs(path)
    message = str(err.value)
    assert "weird.csv" in message and "['premise', 'hypothesis', 'label']" in message
    assert "sent0, sent1, hard_neg" in message and "sentence1, sentence2" in message


def test_forced_format_still_checks_header(tmp_path):
    path = write(tmp_path / "weird.tsv", "a\tb\n1\t2\n")
    with pytest.raises(NLIFormatError, match=r"weird\.tsv.*\['a', 'b'\]"):
        read_pairs(path, fmt="tsv")


def test_unknown_extension_and_missing_file(tmp_path):
    with pytest.raises(NLIFormatError, match=r"data\.parquet.*extension"):
        detect_format(write(tmp_path / "data.parquet", "x"))
    with pytest.raises(NLIFormatError, match="does not exist"):
        detect_format(tmp_path / "nope.csv")


# -- streaming -----------------------------------------------------------------------------------
def numbered_csv(tmp_path: Path, n: int) -> Path:
    rows = "".join(f"p{i},h{i},{'entailment' if i % 3 else 'contradiction'}\n" for i in range(n))
    rows += "pn,hn,neutral\n"  # dropped: must not shift which shard the next pair lands in twice
    return write(tmp_path / "pairs.csv", "sentence1,sentence2,label\n" + rows)


def shard_items(dataset: StreamingNLIDataset, monkeypatch, workers: int) -> list[list]:
    out = []
    for worker_id in range(workers):
        info = SimpleNamespace(num_workers=workers, id=worker_id)
        monkeypatch.setattr(nli, "get_worker_info", lambda info=info: info)
        out.append(list(dataset))
    return out


@pytest.mark.parametrize("shuffle", [False, True])
def test_streaming_yields_each_pair_once_over_2_workers_x_2_ranks(tmp_path, monkeypatch, shuffle):
    path = numbered_csv(tmp_path, 23)
    expected = read_pairs(path)
    shards = []
    for rank in range(2):
        dataset = StreamingNLIDataset(path, shuffle=shuffle, buffer_size=4, seed=3, rank=rank, world_size=2)
        shards += shard_items(dataset, monkeypatch, workers=2)
    assert len(shards) == 4 and all(shards)
    merged = [pair for shard in shards for pair in shard]
    assert Counter(merged) == Counter(expected) and len(merged) == len(expected) == 23
    # rank 0 worker 1 holds items 1, 5, 9, ... (shard index 1 of 4)
    if not shuffle:
        assert shards[1] == expected[1::4]


def test_streaming_with_real_dataloader_workers(tmp_path):
    path = numbered_csv(tmp_path, 10)
    dataset = StreamingNLIDataset(path, shuffle=False, rank=0, world_size=1)
    loader = torch.utils.data.DataLoader(dataset, batch_size=None, num_workers=2, collate_fn=tuple)
    got = list(loader)
    assert sorted(got) == sorted(read_pairs(path))
    assert len(got) == len(read_pairs(path)) == 10


def test_shuffle_buffer_is_seeded_and_epoch_aware(tmp_path):
    path = numbered_csv(tmp_path, 40)
    dataset = StreamingNLIDataset(path, buffer_size=8, seed=1, rank=0, world_size=1)
    first = list(dataset)
    assert list(dataset) == first  # same seed and epoch: same order
    dataset.set_epoch(1)
    second = list(dataset)
    assert second != first and sorted(second) == sorted(first) == sorted(read_pairs(path))
    assert first != read_pairs(path)  # it did shuffle
    unbuffered = StreamingNLIDataset(path, buffer_size=1, seed=1, rank=0, world_size=1)
    assert list(unbuffered) == read_pairs(path)  # a buffer of one cannot reorder


def test_num_pairs_equalizes_shards(tmp_path, monkeypatch):
    path = numbered_csv(tmp_path, 23)
    total = count_pairs(path)
    sizes = []
    for rank in range(2):
        dataset = StreamingNLIDataset(path, shuffle=False, rank=rank, world_size=2, num_pairs=total)
        sizes += [len(s) for s in shard_items(dataset, monkeypatch, workers=2)]
    assert total == 23 and sizes == [5, 5, 5, 5]


def test_epoch_aware_loader_sets_epoch_and_rank_before_iterating(tmp_path):
    path = numbered_csv(tmp_path, 12)
    dataset = StreamingNLIDataset(path, buffer_size=12, seed=0)
    epoch = {"value": 0}
    loader = EpochAwareLoader(
        dataset, batch_size=None, collate_fn=tuple, epoch_source=lambda: epoch["value"], rank_source=lambda: (1, 2)
    )
    order0 = list(loader)
    epoch["value"] = 1
    order1 = list(loader)
    assert dataset.epoch == 1 and (dataset.rank, dataset.world_size) == (1, 2)
    assert len(order0) == len(order1) == 6 and sorted(order0) == sorted(order1) == sorted(read_pairs(path)[1::2])
    assert order0 != order1


# -- data module ---------------------------------------------------------------------------------
@pytest.mark.parametrize("streaming", [True, False])
def test_datamodule_batches(tmp_path, streaming):
    path = numbered_csv(tmp_path, 9)
    dm = NLIDataModule(path=str(path), batch_size=4, max_length=8, tokenizer="tiny", streaming=streaming, seed=0,
                       loader=LOADER)
    batches = list(dm.train_dataloader())
    assert [len(b["labels"]) for b in batches] == [4, 4, 1]
    batch = batches[0]
    assert batch["labels"].dtype == torch.long and set(batch["labels"].tolist()) <= {0, 1}
    for key, texts in (("s1", "texts1"), ("s2", "texts2")):
        ids, mask = batch[key]["input_ids"], batch[key]["attention_mask"]
        assert ids.shape == mask.shape and ids.shape[0] == 4 and ids.shape[1] <= 8
        assert mask[:, -1].any()  # padded to the batch's longest, not beyond
        decoded = dm.tokenizer.batch_decode(ids, skip_special_tokens=True)
        assert decoded == [t.lower() for t in batch[texts]]
    pairs = {(a, b): y for a, b, y in read_pairs(path)}
    seen = [(a, b, int(y)) for bt in batches for a, b, y in zip(bt["texts1"], bt["texts2"], bt["labels"])]
    assert sorted(seen) == sorted((a, b, y) for (a, b), y in pairs.items())


def test_datamodule_needs_a_path():
    with pytest.raises(ValueError, match="path=<file>"):
        NLIDataModule(loader=LOADER)


# -- shared data (SOURCES.md counts) --------------------------------------------------------------
def test_shared_nli_sample_counts(shared_data):
    pairs = read_pairs(shared_data / "nli" / "nli_sample.csv")  # SOURCES.md: 6,697 + 6,515 (+ 6,454 neutral)
    counts = Counter(y for _, _, y in pairs)
    assert counts == {1: 6697, 0: 6515} and len(pairs) == 13212


def test_shared_nli_triplets_counts(shared_data):
    pairs = read_pairs(shared_data / "nli" / "nli_triplets.csv")  # SOURCES.md: 6,339 triplets
    counts = Counter(y for _, _, y in pairs)
    assert counts == {1: 6339, 0: 6339}
    assert all(pairs[i][0] == pairs[i + 1][0] for i in range(0, len(pairs), 2))


@pytest.mark.slow
def test_lightning_trainer_reshuffles_stream_each_epoch(tmp_path):
    path = numbered_csv(tmp_path, 30)
    dm = NLIDataModule(path=str(path), batch_size=4, tokenizer="tiny", streaming=True, buffer_size=30,
                       loader={**LOADER, "num_workers": 2})
    seen, _ = seen_per_epoch(dm, lambda batch: zip(batch["texts1"], batch["texts2"]))
    expected = sorted((a, b) for a, b, _ in read_pairs(path))
    assert sorted(seen[0]) == sorted(seen[1]) == expected
    assert seen[0] != seen[1]
