"""The short-text DataModule: views, collation, evaluation order and bad input."""
import warnings

import pytest

from datamodules.short_text import ShortTextDataModule
from datamodules.short_text_corpus import load_corpus
from tests.helpers.data_files import write_csv
from tests.helpers.speed import LOADER
from textcore.errors import DataConfigError


def make_dm(path, **kwargs):
    defaults = dict(data_dir=str(path.parent), file=path.name, text_column="text0", aug_columns=["text1"],
                    tokenizer="tiny", batch_size=8, eval_batch_size=5)
    defaults.update(kwargs)
    return ShortTextDataModule(**defaults, loader=LOADER)


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
    rows = [["x", f"t {i}", f"a {i}", f"b {i}"] for i in range(6)]
    path = write_csv(tmp_path / "two.csv", ["label", "text0", "a", "b"], rows)
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
    # length-sorted batches: token counts never decrease along the order
    counts = [len(dm.tokenizer(dm.texts[i], truncation=True, max_length=dm.max_length)["input_ids"]) for i in flat]
    assert counts == sorted(counts) and counts[0] < counts[-1]


def test_eval_loader_can_follow_one_fixed_random_permutation(toy_corpus):
    import numpy as np

    dm = make_dm(toy_corpus, eval_sort_by_length=False, eval_shuffle_seed=3, eval_batch_size=8)
    batches = [b["index"].tolist() for b in dm.eval_dataloader()]
    assert [len(b) for b in batches] == [8, 8, 8, 8, 4]
    assert [i for b in batches for i in b] == np.random.default_rng(3).permutation(36).tolist()
    assert batches == [b["index"].tolist() for b in dm.eval_dataloader()]  # the same order every evaluation
    in_file_order = make_dm(toy_corpus, eval_sort_by_length=False, eval_batch_size=8)
    assert [i for b in in_file_order.eval_dataloader() for i in b["index"].tolist()] == list(range(36))
    with pytest.raises(DataConfigError, match="eval_sort_by_length=false"):
        make_dm(toy_corpus, eval_shuffle_seed=3)


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
    rows = [["a", "same", "x"]] * 4 + [["b", "other", "y"]]
    path = write_csv(tmp_path / "dup.csv", ["label", "text0", "text1"], rows)
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
    unset = make_dm(path)  # no K and no labels to count: K is chosen from the texts, which run.py does
    with pytest.warns(UserWarning, match="no label column"):
        unset.setup()
    with pytest.raises(DataConfigError, match="num_clusters=auto is resolved by run.py"):
        unset.num_clusters


def test_tsv_is_read_tab_separated(tmp_path):
    path = tmp_path / "c.tsv"
    path.write_text("label\ttext0\ttext1\na\thello, world\thello\nb\tbye\tbye now\n")
    dm = make_dm(path, num_clusters=2)
    assert dm.texts == ["hello, world", "bye"] and dm.num_clusters == 2


def test_bad_augmentation_mode():
    with pytest.raises(DataConfigError, match="explicit.*virtual"):
        ShortTextDataModule(augmentation="mixed", loader=LOADER)


def test_length_grouped_batches_cover_each_row_once_and_follow_the_epoch():
    from datamodules.short_text import EpochShuffleSampler, LengthGroupedBatchSampler

    lengths = [(i * 7) % 13 for i in range(50)]
    batches = LengthGroupedBatchSampler(EpochShuffleSampler(50, seed=3), lengths, batch_size=4, group=5)
    first = list(batches)
    assert len(first) == len(batches) == 13
    assert sorted(i for b in first for i in b) == list(range(50))
    # within a window rows are sorted by length, so most batches span a small length range
    spans = sorted(max(lengths[i] for i in b) - min(lengths[i] for i in b) for b in first)
    assert spans[len(spans) // 2] <= 3
    assert list(batches) == first  # same epoch, same batches (resumable)
    batches.sampler.set_epoch(1)
    assert list(batches) != first
    dropped = LengthGroupedBatchSampler(EpochShuffleSampler(50, seed=3), lengths, 4, 5, drop_last=True)
    assert len(list(dropped)) == len(dropped) == 12 and all(len(b) == 4 for b in dropped)


def test_length_grouping_loader_and_bad_value(toy_corpus):
    dm = make_dm(toy_corpus, length_grouping=2)
    rows = [i for b in dm.train_dataloader() for i in b["index"].tolist()]
    assert sorted(rows) == list(range(36))
    with pytest.raises(DataConfigError, match="length_grouping"):
        make_dm(toy_corpus, length_grouping=-1)


def test_eval_only_evaluates_the_checkpoint_again_instead_of_reusing_its_history():
    from ctclust.training.fit_callbacks import EvaluateOnly
    from lightning_modules.shared.periodic_evaluation import PeriodicEvaluation

    class Counting(PeriodicEvaluation):
        def _evaluate(self, trainer, pl_module, record=True):
            entry = {"step": trainer.global_step, "fresh": True}
            self.history.append(entry)
            return entry

    class Trainer:
        global_step = 7
        should_stop = False

    evaluator = Counting()
    evaluator.history = [{"step": 7, "fresh": False}]  # restored from the checkpoint
    trainer = Trainer()
    trainer.callbacks = [evaluator]
    evaluator.on_train_end(trainer, None)
    assert evaluator.final == {"step": 7, "fresh": False}  # an ordinary end of training reuses it
    EvaluateOnly().on_train_start(trainer, None)
    evaluator.on_train_end(trainer, None)
    assert trainer.should_stop and evaluator.final == {"step": 7, "fresh": True}
    assert evaluator.history == [{"step": 7, "fresh": True}]
