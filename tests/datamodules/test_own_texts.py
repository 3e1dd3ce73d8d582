"""A user's own file: the text column found when it is not named, K chosen from the texts when there are no labels
(datamodules.short_text_corpus.text_column_of, ShortTextDataModule)."""
from __future__ import annotations

import pandas as pd
import pytest

from datamodules.short_text import ShortTextDataModule
from datamodules.short_text_corpus import load_corpus
from tests.helpers.speed import LOADER
from textcore.errors import DataConfigError

TITLES = ["how to sort a list", "best pasta recipe", "cheap flights to rome", "fix a flat tyre"]


@pytest.mark.parametrize("columns", [
    {"title": TITLES[::-1], "text": TITLES},                 # `text` wins
    {"id": [1, 2, 3, 4], "title": TITLES},                   # numbers are not texts
    {"title": TITLES, "label": ["a", "b", "a", "b"]},        # the label column is not the texts
])
def test_the_text_column_is_found(tmp_path, columns):
    path = tmp_path / "mine.csv"
    pd.DataFrame(columns).to_csv(path, index=False)
    assert load_corpus(path, text_column=None).texts == TITLES


def test_two_columns_of_text_are_named_in_the_error(tmp_path):
    path = tmp_path / "mine.csv"
    pd.DataFrame({"title": TITLES, "body": TITLES[::-1]}).to_csv(path, index=False)
    with pytest.raises(DataConfigError, match=r"2 columns of text \(\['title', 'body'\]\).*dataset.text_column="):
        load_corpus(path, text_column=None)


def test_without_labels_and_without_k_the_number_of_clusters_is_chosen(tmp_path):
    path = tmp_path / "mine.csv"
    pd.DataFrame({"title": TITLES * 3}).to_csv(path, index=False)
    data = ShortTextDataModule(data_dir=str(tmp_path), file="mine.csv", text_column=None, label_column="label",
                               tokenizer="tiny", batch_size=4, num_clusters=None, loader=LOADER,
                               augmentation="virtual")
    with pytest.warns(UserWarning, match="no label column"):
        data.setup("fit")
    assert data.requested_clusters == "auto"  # what run.py's num_clusters=auto resolves before training
