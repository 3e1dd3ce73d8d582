"""The short-text DataModule: views, collation, evaluation order and bad input."""
import warnings

import pytest

from datamodules.short_text import DataConfigError, ShortTextDataModule, load_corpus
from tests.conftest import write_csv


def make_dm(path, **kwargs):
    defaults = dict(data_dir=str(path.parent), file=path.name, text_column="text0", aug_columns=["text1"],
                    tokenizer="tiny", batch_size=8, eval_batch_size=5)
    defaults.update(kwargs)
    return ShortTextDataModule(**defaults)


def test_explicit_views_and_padding_to_longest(toy_corpus):
    dm = make_dm(toy_corpus)
    batch = next(iter(dm.train_dataloader()))
    assert set(batch) >= {"index", "text", "view1", "view2"}
    assert "original" not in batch  # one augmentation column: view 1 is the original text
    lengths = batch["view1"]["attention_mask"].sum(1)
    assert batch["view1"]["input_ids"].shape[1] == lengths.max() < 32


def test_pad_to_max_length_option(toy_corpus):
    batch = next(iter(make_dm(toy_corpus, pad_to_max=True).train_dataloader()))
    assert batch["view1"]["input_ids"].shape[1] == 32


def test_two_augmentation_columns_add_the_original(tmp_path):
    path = write_csv(tmp_path / "two.csv", ["label", "text0", "a", "b"], [["x", f"t {i}", f"a {i}", f"b {i}"] for i in range(6)])
    dm = make_dm(path, aug_columns=["a", "b"], num_clusters=2)
    item = dm.train_dataloader().dataset[3]
    assert (item["view1"], item["view2"], item["text"]) == ("a 3", "b 3", "t 3")
    assert "original" in next(iter(dm.train_dataloader()))


def test_virtual_augmentation_repeats_the_text(toy_corpus):
    dm = make_dm(toy_corpus, augmentation="virtual", aug_columns=[])
    item = dm.train_dataloader().dataset[0]
    assert item["view1"] == item["view2"] == item["text"]


def test_eval_loader_covers_every_row_once_in_fixed_order(toy_corpus):
    dm = make_dm(toy_corpus)
    first = [b["index"].tolist() for b in dm.eval_dataloader()]
    second = [b["index"].tolist() for b in dm.eval_dataloader()]
    flat = [i for b in first for i in b]
    assert first == second and sorted(flat) == list(range(36))
    # length-sorted batches: word counts never decrease along the order
    counts = [len(dm.texts[i].split()) for i in flat]
    assert counts == sorted(counts)


def test_missing_text_column_names_file_and_columns(toy_corpus):
    with pytest.raises(DataConfigError, match=r"Column 'body'.*toy.csv.*\['label', 'text0', 'text1'\]"):
        make_dm(toy_corpus, text_column="body").setup()


def test_missing_augmentation_column_suggests_virtual(toy_corpus):
    with pytest.raises(DataConfigError, match=r"'text2'.*augmentation=virtual"):
        make_dm(toy_corpus, aug_columns=["text2"]).setup()


def test_empty_file_and_header_only(tmp_path):
    (tmp_path / "empty.csv").write_text("")
    with pytest.raises(DataConfigError, match="empty.csv' is empty"):
        load_corpus(tmp_path / "empty.csv", "text0")
    (tmp_path / "header.csv").write_text("label,text0\n")
    with pytest.raises(DataConfigError, match="header but no rows"):
        load_corpus(tmp_path / "header.csv", "text0")


def test_nonexistent_file_says_to_set_data_dir(tmp_path):
    with pytest.raises(DataConfigError, match=r"nope.csv' does not exist.*data_dir="):
        make_dm(tmp_path / "nope.csv").setup()


def test_more_clusters_than_distinct_texts(tmp_path):
    path = write_csv(tmp_path / "dup.csv", ["label", "text0", "text1"], [["a", "same", "x"]] * 4 + [["b", "other", "y"]])
    with pytest.raises(DataConfigError, match=r"3 clusters requested.*only 2 distinct texts"):
        make_dm(path, num_clusters=3).setup()


def test_empty_texts_replaced_counted_in_one_warning(tmp_path):
    rows = [["a", "", "aug zero"], ["a", "text one", ""], ["b", "  ", "aug two"], ["b", "text three", "aug three"]]
    path = write_csv(tmp_path / "holes.csv", ["label", "text0", "text1"], rows)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        corpus = load_corpus(path, "text0", "label", ["text1"])
    messages = [str(w.message) for w in caught if "replaced" in str(w.message)]
    assert len(messages) == 1 and "2 in 'text0'" in messages[0] and "1 in 'text1'" in messages[0]
    assert corpus.texts[0] == "aug zero" and corpus.augmentations[0][1] == "text one"


def test_file_without_labels_trains_without_accuracy(tmp_path):
    path = write_csv(tmp_path / "nolabel.csv", ["text0", "text1"], [[f"t {i}", f"a {i}"] for i in range(6)])
    with pytest.warns(UserWarning, match="no label column"):
        dm = make_dm(path, num_clusters=2)
        dm.setup()
    assert dm.labels is None and dm.num_clusters == 2
    with pytest.raises(DataConfigError, match="set dataset.num_clusters"):
        make_dm(path).setup()


def test_tsv_is_read_tab_separated(tmp_path):
    path = tmp_path / "c.tsv"
    path.write_text("label\ttext0\ttext1\na\thello, world\thello\nb\tbye\tbye now\n")
    dm = make_dm(path, num_clusters=2)
    assert dm.texts == ["hello, world", "bye"] and dm.num_clusters == 2


def test_bad_augmentation_mode():
    with pytest.raises(DataConfigError, match="explicit.*virtual"):
        ShortTextDataModule(augmentation="mixed")
