"""Data as the authors prepared it (datamodules/prepare.py): PairSupCon's NLI pairs. (SCCL's contextual
substitution views are the augment tool's: tests/datamodules/test_augment.py.)"""
from __future__ import annotations

import pandas as pd
import pytest

from ctclust.commands.prepare import main
from datamodules.prepare import nli_pairs
from tests.helpers.speed import LOADER


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
    assert main(["nli-pairs", "--input", str(tmp_path / "nli_for_simcse.csv")]).equals(pairs)  # the command
    assert pd.read_csv(tmp_path / "nli_pairs.csv").values.tolist() == pairs.values.tolist()
    with pytest.raises(SystemExit):  # substitution views moved to the augment tool
        main(["substitute", "--input", str(tmp_path / "nli_for_simcse.csv")])


def test_offline_reason_answers_fast_for_local_folders_and_the_offline_setting(tmp_path, monkeypatch):
    import time

    from textcore.encoding.hub import offline_reason

    assert offline_reason(str(tmp_path)) is None  # a local folder
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "empty"))
    start = time.perf_counter()
    assert "HF_HUB_OFFLINE=1" in offline_reason("no-such-org/no-such-model")
    assert time.perf_counter() - start < 2
