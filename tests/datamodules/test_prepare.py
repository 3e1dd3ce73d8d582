"""Data as the authors prepared it (datamodules/prepare.py): contextual substitution views, NLI pairs."""
from __future__ import annotations

import pandas as pd
import pytest

from datamodules.prepare import choose_positions, main, nli_pairs, substitute_file
from tests.helpers.speed import LOADER

TEXTS = ["brain fluid buildup delay giffords rehab", "trailer talk week movie rite mechanic week opportunity",
         "stocks fell sharply on monday after the report", "a cat", "the new phone has a bigger screen and battery"]


def write_texts(path):
    pd.DataFrame({"label": [1, 2, 3, 1, 2], "text0": TEXTS}).to_csv(path, index=False)
    return path


def test_positions_are_a_share_of_the_words_at_least_one():
    import numpy as np

    rng = np.random.default_rng(0)
    assert len(choose_positions(10, 0.2, rng)) == 2 and len(choose_positions(2, 0.2, rng)) == 1
    assert choose_positions(0, 0.2, rng) == [] and len(set(choose_positions(7, 1.0, rng))) == 7


def test_two_views_replace_a_fifth_of_the_words_and_keep_the_rest(tmp_path):
    path = write_texts(tmp_path / "set.csv")
    frame = substitute_file(path, "text0", "label", ["tiny", "tiny"], tmp_path / "out.csv", share=0.2, seed=0)
    written = pd.read_csv(tmp_path / "out.csv")
    assert list(written.columns) == ["label", "text", "text1", "text2"] and written["text"].tolist() == TEXTS
    changed_any = False
    for original, *views in frame[["text", "text1", "text2"]].itertuples(index=False):
        words = original.split()
        for view in views:
            new = view.split()
            assert len(new) == len(words)
            changed = sum(a != b for a, b in zip(words, new))
            assert changed <= max(1, round(0.2 * len(words)))
            changed_any |= changed > 0
    assert changed_any
    # the two views come from different generators (view 1 and view 2), so they differ somewhere
    assert frame["text1"].tolist() != frame["text2"].tolist()
    again = substitute_file(path, "text0", "label", ["tiny", "tiny"], tmp_path / "again.csv", share=0.2, seed=0)
    other = substitute_file(path, "text0", "label", ["tiny", "tiny"], tmp_path / "other.csv", share=0.2, seed=1)
    assert again.equals(frame) and not other.equals(frame)


def test_offline_model_and_bad_arguments_stop_with_one_message(tmp_path, monkeypatch, capsys):
    path = write_texts(tmp_path / "set.csv")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(SystemExit) as exit_info:
        main(["substitute", "--input", str(path), "--text-column", "text0", "--models", "roberta-base,tiny"])
    err = capsys.readouterr().err
    assert exit_info.value.code == 2 and "'roberta-base'" in err and "hf download roberta-base" in err
    for args, message in ((["--models", "tiny"], "two masked language models"), (["--share", "0"], "--share"),
                          (["--text-column", "body"], "no column 'body'")):
        with pytest.raises(SystemExit):
            main(["substitute", "--input", str(path), "--text-column", "text0", *args])
        assert message in capsys.readouterr().err


def test_nli_triplets_become_entailment_and_contradiction_pairs_that_the_nli_loader_reads(tmp_path):
    triplets = pd.DataFrame({"sent0": ["A man sleeps .", "Two dogs run ."],
                             "sent1": ["A person rests .", "Dogs move ."],
                             "hard_neg": ["A man runs .", "Cats sit ."]})
    triplets.to_csv(tmp_path / "nli_for_simcse.csv", index=False)
    pairs = nli_pairs(tmp_path / "nli_for_simcse.csv", tmp_path / "pairs.csv")
    assert pairs.values.tolist() == [
        ["A man sleeps .", "A person rests .", "entailment"], ["A man sleeps .", "A man runs .", "contradiction"],
        ["Two dogs run .", "Dogs move .", "entailment"], ["Two dogs run .", "Cats sit .", "contradiction"]]
    from datamodules.nli import NLIDataModule

    dm = NLIDataModule(data_dir=str(tmp_path), file="pairs.csv", tokenizer="tiny", batch_size=2, loader=LOADER)
    dm.setup("fit")
    labels = [int(v) for batch in dm.train_dataloader() for v in batch["labels"]]
    assert sorted(labels) == [0, 0, 1, 1]  # contradiction 0, entailment 1
    (tmp_path / "bad.csv").write_text("a,b\n1,2\n")
    with pytest.raises(Exception, match="sent0"):
        nli_pairs(tmp_path / "bad.csv", tmp_path / "x.csv")


def test_offline_reason_answers_fast_for_local_folders_and_the_offline_setting(tmp_path, monkeypatch):
    import time

    from lightning_modules.shared.hub import offline_reason

    assert offline_reason(str(tmp_path)) is None  # a local folder
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "empty"))
    start = time.perf_counter()
    assert "HF_HUB_OFFLINE=1" in offline_reason("no-such-org/no-such-model")
    assert time.perf_counter() - start < 2
