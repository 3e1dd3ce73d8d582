"""Fuzzing the file readers (datamodules/table_reader.py, datamodules/text_decoding.py and the readers built on them):
generated tables of 0-5 rows with empty, duplicate and odd texts, missing or odd labels, in CSV/TSV/JSON
Lines/Parquet/plain text and five encodings, read with the right encoding or a wrong one, with K from 1 to rows + 2.
Each read gives exactly the texts, labels, file lines and K written, or one line that names the file or the key
(tests/helpers/fuzz_strategies.py)."""
from __future__ import annotations

import tempfile
import warnings
from pathlib import Path

import numpy as np
from hypothesis import example, given
from hypothesis import strategies as st

from tests.helpers.fuzz_files import has_text, kept_rows, write_table
from tests.helpers.fuzz_strategies import ENCODINGS, FORMATS, budget, tables, user_error_or
from tests.helpers.speed import LOADER


def corpus_case():
    return st.tuples(tables(), st.sampled_from(FORMATS), st.sampled_from(ENCODINGS), st.booleans(),
                     st.one_of(st.none(), st.integers(1, 8)))


def expected_failure(written, k) -> bool:
    """Whether a run must stop on this file with K = ``k`` (None: K from the labels): the documented rules."""
    keep = kept_rows(written)
    if not keep:
        return True
    labels = written.labels
    if labels is not None and any(labels[i] in (None, "") for i in keep):
        return True  # a kept row without a label
    if k is None:
        if labels is None:
            return True
        k = len({labels[i] for i in keep})  # K from the labels
    return k < 2 or k > len({written.texts[i] for i in keep})  # K clusters need K different texts


@budget(fast=60, long=3000)
@given(corpus_case())
@example(((["a", "b"], None), "csv", "utf-8-sig", True, 2))  # two texts with a byte-order mark
@example(((["a", "b"], None), "tsv", "utf-8", True, 2))
@example(((["", " ", "x"], ["1", "", "2"]), "csv", "utf-8", True, None))  # label missing on a dropped row only
@example(((["x\ny", "z"], ["a", "b"]), "csv", "utf-16", True, None))  # a line break inside a quoted cell
@example(((["0", "0", "0"], ["a", "a", "b"]), "csv", "utf-8", True, None))  # K from labels > distinct texts
@example(((["a", " ", "b"], None), "csv", "utf-8", True, 2))  # a line pandas skips: later file lines were off by one
@example(((["x" * 140_000, "a\nb", "c"], None), "csv", "utf-8", True, 2))  # a field beyond csv's default limit
def test_short_text_corpus_reads_what_was_written_or_names_the_problem(case):
    from datamodules.short_text import ShortTextDataModule

    (texts, labels), fmt, encoding, same_encoding, k = case
    with tempfile.TemporaryDirectory() as folder:
        written = write_table(Path(folder), texts, labels, fmt, encoding)
        declared = written.encoding if same_encoding else ("latin-1" if written.encoding != "latin-1" else "utf-8")
        dm = ShortTextDataModule(data_dir=folder, file=written.path.name, augmentation="virtual",
                                 num_clusters=k, encoding=declared, loader=LOADER)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # dropped rows, no label column: warned, and checked below
            with user_error_or(written.path.name, "dataset.", "num_clusters") as outcome:
                dm.setup()
                got_k = dm.num_clusters
        if not same_encoding and fmt != "parquet":
            return  # a wrong encoding may decode to other characters: only "no traceback" holds
        must_fail = expected_failure(written, k)
        assert (outcome["error"] is not None) == must_fail, (outcome["error"], written)
        if must_fail:
            return
        keep = kept_rows(written)
        assert dm.texts == [written.texts[i] for i in keep]
        if written.labels is None:
            assert dm.labels is None
        else:
            assert [str(v) for v in dm.labels] == [written.labels[i] for i in keep]
        assert got_k == (k if k is not None else len({written.labels[i] for i in keep}))
        if written.lines is not None:
            assert dm.lines == [written.lines[i] for i in keep]


@budget(fast=40, long=2000)
@given(tables(), st.sampled_from(FORMATS), st.sampled_from(ENCODINGS))
@example(([], None), "csv", "utf-8")
@example(([" "], None), "txt", "utf-8")
def test_cli_readers_of_choose_k_and_predict(table, fmt, encoding):
    """``python tools.py choose-k`` and ``python tools.py predict`` read through the
    same reader."""
    from evaluation.model_io.embed_and_choose_k import read_texts as choose_k_texts
    from evaluation.model_io.predict import read_texts as predict_texts

    texts, labels = table
    with tempfile.TemporaryDirectory() as folder:
        written = write_table(Path(folder), texts, labels, fmt, encoding)
        with user_error_or(written.path.name) as chosen:
            got = choose_k_texts(written.path, "text", written.encoding)
        kept = [t for t in written.texts if has_text(t)]
        if len(kept) >= 3:
            assert chosen["error"] is None and got == kept
        else:
            assert chosen["error"] is not None
        with user_error_or(written.path.name, "--input") as predicted:
            values, blank, lines = predict_texts(written.path, "text", written.encoding)
        if not kept:
            assert predicted["error"] is not None
            return
        assert predicted["error"] is None
        assert values == ["" if t is None else t for t in written.texts]
        assert blank.tolist() == [not has_text(t) for t in written.texts]
        if written.lines is not None:
            assert lines == written.lines


@budget(fast=30, long=1500)
@given(st.binary(max_size=200), st.sampled_from(["csv", "tsv", "jsonl", "parquet", "txt", "json", "dat"]),
       st.sampled_from(ENCODINGS + ("utf-9",)))
@example(b"\xef\xbb\xbf", "csv", "utf-8")  # a byte-order mark and nothing else
@example(b"PAR1", "parquet", "utf-8")
@example(b"text\n\x80\n", "csv", "utf-8")
def test_any_bytes_read_as_a_table_or_name_the_file(data, suffix, encoding):
    """Whatever the bytes, the reader returns a table of strings or one line naming the file or the option."""
    from datamodules.table_reader import read_table

    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / f"blob.{suffix}"
        path.write_bytes(data)
        with user_error_or(path.name, "dataset.encoding") as outcome:
            frame = read_table(path, encoding)
        if outcome["error"] is None:
            assert all(isinstance(v, str) or v != v for v in np.ravel(frame.to_numpy(dtype=object)))


@budget(fast=30, long=1500)
@given(st.binary(max_size=200), st.sampled_from(["jsonl", "tsv", "csv", "txt"]), st.sampled_from(ENCODINGS),
       st.sampled_from(["nli", "sentences"]))
@example(b"\x00\x00", "jsonl", "utf-16", "nli")  # UTF-16 without a byte-order mark
@example(b"\x00\x00", "txt", "utf-16", "sentences")
@example(b'{"sentence1": "a", "sentence2": "b", "gold_label": "entailment"}\n{"x": 1', "jsonl", "utf-8", "nli")
def test_nli_and_sentence_files_of_any_bytes(data, suffix, encoding, kind):
    """The NLI readers (JSON Lines, TSV, CSV) and the sentence file of SimCSE/ClusterNS on arbitrary bytes."""
    from datamodules.nli_files import read_pairs
    from datamodules.streaming_text import StreamingTextDataset

    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / f"blob.{suffix}"
        path.write_bytes(data)
        with user_error_or(path.name, "dataset.encoding", "NLI") as outcome:
            if kind == "nli":
                pairs = read_pairs(path, encoding=encoding)
            else:
                count = StreamingTextDataset(path, buffer_size=1, rank=0, world_size=1, encoding=encoding).count_texts()
        if outcome["error"] is None and kind == "nli":
            assert all(isinstance(a, str) and isinstance(b, str) for a, b, *_ in pairs)
        elif outcome["error"] is None:
            assert count >= 1
