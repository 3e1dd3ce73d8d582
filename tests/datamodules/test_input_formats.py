"""Short-text data in every common format: CSV, TSV, JSON Lines, Parquet, plain text, a Hub dataset; the same
texts and labels from each, and one clear message for a bad file of each format."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from datamodules.short_text_corpus import load_corpus
from datamodules.table_reader import TableError, read_hub_dataset, read_table, row_start_lines
from textcore.errors import UserError

ROOT = Path(__file__).resolve().parents[2]
ROWS = [("sport", "the match ended in a draw"), ("food", 'a "quoted" recipe, with commas'), ("sport", "goal!"),
        ("food", "soup 🍲 ünïcode")]


def write_all(folder: Path) -> dict[str, Path]:
    frame = pd.DataFrame(ROWS, columns=["label", "text"])
    paths = {fmt: folder / f"texts.{fmt}" for fmt in ("csv", "tsv", "jsonl", "parquet")}
    frame.to_csv(paths["csv"], index=False)
    frame.to_csv(paths["tsv"], index=False, sep="\t")
    paths["jsonl"].write_text("".join(json.dumps({"label": lab, "text": txt}, ensure_ascii=False) + "\n"
                                      for lab, txt in ROWS), encoding="utf-8")
    frame.to_parquet(paths["parquet"])
    paths["txt"] = folder / "texts.txt"
    paths["txt"].write_text("".join(txt + "\n" for _, txt in ROWS), encoding="utf-8")
    return paths


def test_every_format_gives_the_same_texts_and_labels(tmp_path):
    paths = write_all(tmp_path)
    expected = [txt for _, txt in ROWS]
    for fmt, path in paths.items():
        corpus = load_corpus(path, "text", None if fmt == "txt" else "label")
        assert corpus.texts == expected, fmt
        if fmt != "txt":  # the same partition into classes, whatever ids the labels get
            labels = list(corpus.labels)
            assert labels[0] == labels[2] != labels[1] == labels[3], fmt
    assert row_start_lines(paths["jsonl"]) == [1, 2, 3, 4] and row_start_lines(paths["parquet"]) is None


def test_json_lines_skip_blank_lines(tmp_path):
    good = tmp_path / "a.jsonl"
    good.write_text('{"text": "one"}\n\n{"text": "two", "extra": 3}\n')
    assert read_table(good)["text"].tolist() == ["one", "two"] and row_start_lines(good) == [1, 3]


@pytest.mark.parametrize("name, content, error, message", [
    ("b.jsonl", '{"text": "one"}\n{"text": "two"\n', TableError, r"b.jsonl' line 2 is not valid JSON"),
    ("c.jsonl", '["not", "an", "object"]\n', TableError, "line 1 holds a JSON list, not an object"),
    ("fake.parquet", "this is not parquet", TableError, "fake.parquet' cannot be read as Parquet"),
    ("empty.txt", "\n\n", UserError, "empty.txt' holds no text"),
])
def test_a_bad_file_says_which_file_and_line(tmp_path, name, content, error, message):
    path = tmp_path / name
    path.write_text(content)
    with pytest.raises(error, match=message):
        read_table(path)


def test_a_missing_column_lists_the_columns_of_a_jsonl_file(tmp_path):
    path = write_all(tmp_path)["jsonl"]
    with pytest.raises(UserError, match=r"Column 'sentence' .* the file has columns \['label', 'text'\]"):
        load_corpus(path, "sentence", "label")


@pytest.mark.slow
def test_hub_dataset_offline_is_one_message(monkeypatch, tmp_path):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    with pytest.raises(TableError) as err:
        read_hub_dataset("someone/short_texts", "train")
    message = str(err.value)
    assert message.startswith("dataset.name=someone/short_texts (split 'train') cannot be loaded")
    assert "hf download someone/short_texts --repo-type dataset" in message and "\n" not in message


@pytest.mark.slow
def test_hub_dataset_run_offline_stops_with_one_line(tmp_path):
    env = dict(os.environ, PROJECT_ROOT=str(ROOT), HF_HUB_OFFLINE="1", HF_DATASETS_OFFLINE="1",
               HF_HOME=str(tmp_path / "hf"))
    done = subprocess.run([sys.executable, "run.py", "dataset=hf", "dataset.name=someone/short_texts",
                           "backbone=tiny", f"hydra.run.dir={tmp_path / 'run'}"], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 2, done.stderr[-2000:]
    lines = [line for line in done.stderr.splitlines() if line.startswith("error:")]
    assert len(lines) == 1 and "someone/short_texts" in lines[0] and "Traceback" not in done.stderr


def test_an_unlabelled_jsonl_file_trains_and_reports_without_label_columns(tmp_path):
    from ctclust.training.train import train
    from tests.helpers import compose_config

    path = tmp_path / "mine.jsonl"
    texts = [f"{w} {i}" for i in range(12) for w in ("football match goal", "pasta tomato sauce")]
    path.write_text("".join(json.dumps({"text": t}) + "\n" for t in texts))
    out = tmp_path / "run"
    train(compose_config(["backbone=tiny", "dataset=csv", f"data_dir={tmp_path}", "dataset.file=mine.jsonl",
                          "dataset.num_clusters=2", "batch_size=8", "trainer.max_steps=2",
                          "trainer.enable_progress_bar=false", "~callbacks.progress", "print_table=false",
                          "callbacks.report.plots=false", "method.callbacks.centroid_init.n_init=2",
                          "dataset.callbacks.clustering_eval.every_n_steps=0"], out))
    predictions = pd.read_csv(out / "predictions.csv")
    assert len(predictions) == len(texts) and not any("label" in c for c in predictions.columns)
    assert "purity" not in (out / "clusters.md").read_text().lower()


def test_file_lines_from_a_count_of_line_ends_agree_with_the_table_reading(tmp_path):
    """A file with one line per row takes its lines from a count of line ends; a quoted text over two lines, a
    blank line, a missing last line end, UTF-16 and a BOM give the same lines as the row-by-row reading."""
    from datamodules.table_reader import row_start_lines

    cases = {
        "plain.csv": ("text,label\na,1\nb,2\nc,3\n", "utf-8", 3),
        "no_last_end.csv": ("text,label\na,1\nb,2\nc,3", "utf-8", 3),
        "spans.csv": ('text,label\n"a\nb",1\nc,2\nd,3\n', "utf-8", 3),
        "blank.csv": ("text,label\na,1\n\nb,2\nc,3\n", "utf-8", 3),
        "crlf.csv": ("text,label\r\na,1\r\nb,2\r\nc,3\r\n", "utf-8", 3),
        "bom.csv": ("\ufefftext,label\na,1\nb,2\nc,3\n", "utf-8", 3),
        "wide.csv": ("text,label\na,1\nb,2\nc,3\n", "utf-16", 3),
    }
    for name, (content, encoding, rows) in cases.items():
        path = tmp_path / name
        path.write_bytes(content.encode(encoding))
        counted = row_start_lines(path, encoding, rows=rows)
        assert counted == row_start_lines(path, encoding), name
    assert row_start_lines(tmp_path / "spans.csv", rows=3) == [2, 4, 5]
    assert row_start_lines(tmp_path / "blank.csv", rows=3) == [2, 4, 5]
    assert row_start_lines(tmp_path / "plain.csv", rows=3) == [2, 3, 4]
