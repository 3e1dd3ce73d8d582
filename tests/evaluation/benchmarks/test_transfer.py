"""SentEval transfer: readers, logistic-regression protocols and the CLI (evaluation/benchmarks/transfer*.py)."""

from __future__ import annotations

import json
import zlib
from pathlib import Path

import numpy as np
import pytest
import torch

from ctclust.commands.transfer import main
from evaluation.benchmarks.senteval.protocols import cv_select_and_fit, pair_features
from evaluation.benchmarks.senteval.readers import TransferDataError, read_binary, read_mrpc, read_sst2, read_trec
from evaluation.benchmarks.transfer import evaluate_transfer
from tests.helpers.speed import CHUNKS

FAST = {"protocol": "sklearn", "kfold": 2, "inner_kfold": 2}  # SentEval uses 10; 2 keeps unit tests fast
TREC_CLASSES = ("ABBR", "DESC", "ENTY", "HUM", "LOC", "NUM")


def hash_vector(text: str, dim: int = 16) -> np.ndarray:
    """A fixed random vector per distinct text: carries no label information by itself."""
    return np.random.default_rng(zlib.crc32(text.encode())).normal(size=dim)


def random_encoder(texts: list[str]) -> np.ndarray:
    return np.stack([hash_vector(t) for t in texts])


KEYWORDS = ("alpha", "beta") + tuple(c.lower() for c in TREC_CLASSES)


def keyword_encoder(texts: list[str]) -> np.ndarray:
    """Separable: one-hot of the class keyword plus label-free noise."""
    onehot = np.array([[float(k in t.split()) for k in KEYWORDS] for t in texts])
    return np.concatenate([3 * onehot, 0.3 * random_encoder(texts)], axis=1)


def write_lines(path: Path, lines: list[str], encoding: str = "utf-8", bom: bool = False) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    data = "".join(line + "\n" for line in lines).encode(encoding)
    path.write_bytes((b"\xef\xbb\xbf" if bom else b"") + data)


def make_senteval(root: Path, n: int = 30, tasks=("MR", "CR", "SUBJ", "MPQA", "SST2", "TREC", "MRPC")) -> Path:
    """A SentEval-layout folder; class-1 sentences contain 'alpha', class-0 ones 'beta'."""
    pos = [f"sentence {i} alpha here" for i in range(n)]
    neg = [f"sentence {i} beta there" for i in range(n)]
    binary = {
        "MR": ("rt-polarity.pos", "rt-polarity.neg"),
        "CR": ("custrev.pos", "custrev.neg"),
        "SUBJ": ("subj.objective", "subj.subjective"),
        "MPQA": ("mpqa.pos", "mpqa.neg"),
    }
    for task, (p, q) in binary.items():
        if task in tasks:
            extra = [""] if task in ("CR", "MPQA") else []  # the real CR/MPQA files hold empty lines
            write_lines(root / task / p, pos[: n // 2] + extra + pos[n // 2 :], "latin-1")
            write_lines(root / task / q, neg + extra, "latin-1")
    if "SST2" in tasks:
        for split, m in (("train", n), ("dev", n // 2), ("test", n // 2)):
            lines = [f"{split} {i} alpha café\t1" for i in range(m)] + [f"{split} {i} beta\t0" for i in range(m)]
            write_lines(root / "SST/binary" / f"sentiment-{split}", lines)
    if "TREC" in tasks:
        for name, m in (("train_5500.label", n), ("TREC_10.label", n // 3)):
            lines = [f"{c}:fine {name[:4]} q{i} {c.lower()} sister\xf0city ?" for c in TREC_CLASSES for i in range(m)]
            write_lines(root / "TREC" / name, lines, "latin-1")
    if "MRPC" in tasks:
        for split, m in (("train", n), ("test", n // 2)):
            rows = ["Quality\t#1 ID\t#2 ID\t#1 String\t#2 String"]
            for i in range(m):  # paraphrase = the same sentence twice; non-paraphrase = two different ones
                rows.append(f"1\t{i}\t{i}\t{split} same {i} .\t{split} same {i} .")
                rows.append(f'0\t{i}\t{i + 1}\t{split} left {i} .\t{split} right {i} " quoted .')
            write_lines(root / "MRPC" / f"msr_paraphrase_{split}.txt", rows, bom=True)
    return root


# -- readers -------------------------------------------------------------------------------------
def test_binary_reader_labels_counts_and_empty_lines(tmp_path):
    root = make_senteval(tmp_path, n=10, tasks=("CR", "SUBJ"))
    cr = read_binary(root / "CR", "CR")
    assert len(cr) == 20 and cr.labels.tolist() == [1] * 10 + [0] * 10  # 2 empty lines dropped
    assert all(cr.texts) and cr.texts[0] == "sentence 0 alpha here"
    subj = read_binary(root / "SUBJ", "SUBJ")
    assert subj.labels[subj.texts.index("sentence 3 alpha here")] == 1  # objective file = label 1


def test_sst2_reader_splits_and_utf8(tmp_path):
    splits = read_sst2(make_senteval(tmp_path, n=4, tasks=("SST2",)) / "SST/binary")
    assert {k: len(v) for k, v in splits.items()} == {"train": 8, "dev": 4, "test": 4}
    assert splits["train"].texts[0] == "train 0 alpha café" and splits["train"].labels.tolist() == [1] * 4 + [0] * 4


def test_trec_reader_coarse_labels_and_latin1(tmp_path):
    splits = read_trec(make_senteval(tmp_path, n=3, tasks=("TREC",)) / "TREC")
    train, test = splits["train"], splits["test"]
    assert len(train) == 18 and len(test) == 6
    assert train.texts[0] == "trai q0 abbr sister\u00f0city ?"  # 0xF0 read as Latin-1 'ð', class prefix removed
    assert np.bincount(train.labels).tolist() == [3] * 6 and test.labels.tolist() == [0, 1, 2, 3, 4, 5]


def test_trec_reader_rejects_line_without_class(tmp_path):
    write_lines(tmp_path / "TREC" / "train_5500.label", ["DESC:manner How ?", "no class here"], "latin-1")
    write_lines(tmp_path / "TREC" / "TREC_10.label", ["NUM:date When ?"], "latin-1")
    with pytest.raises(TransferDataError, match=r"train_5500\.label line 2"):
        read_trec(tmp_path / "TREC")


def test_mrpc_reader_bom_header_and_quotes(tmp_path):
    splits = read_mrpc(make_senteval(tmp_path, n=3, tasks=("MRPC",)) / "MRPC")
    train = splits["train"]
    assert len(train) == 6 and len(splits["test"]) == 2 * 1
    assert train.labels.tolist() == [1, 0] * 3
    assert train.texts[1] == "train left 0 ." and train.texts_b[1] == 'train right 0 " quoted .'


def test_mrpc_reader_bad_header_names_file(tmp_path):
    write_lines(tmp_path / "MRPC" / "msr_paraphrase_train.txt", ["label\ta\tb", "1\tx\ty"], bom=True)
    with pytest.raises(TransferDataError, match=r"msr_paraphrase_train\.txt.*\['label', 'a', 'b'\]"):
        read_mrpc(tmp_path / "MRPC")


def test_shared_data_counts(shared_data):
    root = shared_data / "senteval" / "downstream"
    # SOURCES.md line counts minus empty lines (CR 4, MPQA 3)
    assert len(read_binary(root / "CR", "CR")) == 3771
    assert len(read_binary(root / "MPQA", "MPQA")) == 10603
    trec = read_trec(root / "TREC")
    assert (len(trec["train"]), len(trec["test"])) == (5452, 500)
    mrpc = read_mrpc(root / "MRPC")
    assert (len(mrpc["train"]), len(mrpc["test"])) == (4076, 1725)


# -- classifiers ---------------------------------------------------------------------------------
def test_pair_features_layouts():
    u, v = np.array([[1.0, -2.0]]), np.array([[3.0, 1.0]])
    assert pair_features(u, v).tolist() == [[2.0, 3.0, 3.0, -2.0]]
    assert pair_features(u, v, "full").tolist() == [[1.0, -2.0, 3.0, 1.0, 2.0, 3.0, 3.0, -2.0]]


def test_cv_selection_prefers_weak_regularisation_on_clean_signal():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(120, 5))
    y = (X[:, 0] + 0.2 * rng.normal(size=120) > 0).astype(int)
    _, C, dev = cv_select_and_fit(X, y, (10.0, 1e-4), folds=3, seed=0)
    # C=1e-4 shrinks the weights to ~0, leaving the (unpenalised) intercept: majority class, ~50%
    assert C == 10.0 and dev > 85


@pytest.mark.parametrize("task", ["MR", "CR", "SUBJ", "MPQA", "SST2", "TREC", "MRPC"])
def test_separable_synthetic_task_scores_high(tmp_path, task):
    root = make_senteval(tmp_path, n=20, tasks=(task,))
    result = evaluate_transfer(keyword_encoder, root, tasks=[task], seed=0, **FAST)
    scores = result["tasks"][task]
    assert scores["acc"] > 95, scores
    assert result["avg_over"] == [task] and result["avg"] == scores["acc"]
    if task == "MRPC":  # |u-v| = 0 marks a paraphrase
        assert scores["f1"] > 95 and scores["n_train"] == 40 and scores["n_test"] == 20
    if task == "TREC":
        assert (scores["n_train"], scores["n_test"]) == (120, 36)
    if task in ("MR", "SUBJ"):
        assert scores["n"] == 40 and len(scores["C"]) == FAST["kfold"]


def test_random_embeddings_give_chance_accuracy(tmp_path):
    root = make_senteval(tmp_path, n=200, tasks=("MR",))
    result = evaluate_transfer(random_encoder, root, tasks=["MR"], **FAST)
    assert 38 < result["tasks"]["MR"]["acc"] < 62


def test_max_train_subsamples_stratified_and_is_recorded(tmp_path):
    root = make_senteval(tmp_path, n=30, tasks=("MR", "SST2"))
    result = evaluate_transfer(keyword_encoder, root, tasks=["MR", "SST2"], max_train=20, **FAST)
    assert result["settings"]["max_train"] == 20
    assert (result["tasks"]["MR"]["n"], result["tasks"]["MR"]["n_full"]) == (20, 60)
    assert (result["tasks"]["SST2"]["n_train"], result["tasks"]["SST2"]["n_train_full"]) == (20, 60)


def test_missing_task_folder_is_skipped_with_warning(tmp_path):
    root = make_senteval(tmp_path, n=15, tasks=("MR",))
    with pytest.warns(UserWarning, match="TREC skipped"):
        result = evaluate_transfer(keyword_encoder, root, tasks=["MR", "TREC"], **FAST)
    assert "not found" in result["tasks"]["TREC"]["skipped"]
    assert result["avg_over"] == ["MR"] and result["avg"] == result["tasks"]["MR"]["acc"]


def test_encoder_with_wrong_shape_is_reported(tmp_path):
    root = make_senteval(tmp_path, n=15, tasks=("MR",))
    with pytest.raises(ValueError, match="encode returned shape"):
        evaluate_transfer(lambda texts: np.zeros((len(texts) - 1, 4)), root, tasks=["MR"], **FAST)


class FakeTextEncoder:
    def __init__(self, name, settings):
        self.args = (name, settings.pooling, settings.max_length)

    def eval(self):
        return self

    def encode(self, texts, batch_size=128, pooling=None):
        return torch.from_numpy(keyword_encoder(texts)).float()


def test_cli_writes_markdown_and_json(tmp_path, monkeypatch):
    import textcore.encoding.encoder as encoder

    monkeypatch.setattr(encoder.TextEncoder, "from_name", FakeTextEncoder)
    root = make_senteval(tmp_path / "data", n=12, tasks=("MR", "MRPC"))
    out = tmp_path / "out"
    with pytest.warns(UserWarning, match="SUBJ skipped"):
        main(
            [
                "--model",
                "fake",
                "--data-dir",
                str(root),
                "--output",
                str(out),
                "--tasks",
                "MR",
                "MRPC",
                "SUBJ",
                "--kfold",
                "3",
                "--inner-kfold",
                "0",
                "--protocol",
                "sklearn",
            ]
        )
    result = json.loads((out / "transfer.json").read_text())
    assert result["settings"]["model"] == "fake" and result["settings"]["inner_kfold"] == 0
    assert result["tasks"]["MR"]["acc"] > 95 and result["tasks"]["MR"]["protocol"] == "3-fold CV, C=1"
    assert result["tasks"]["MR"]["devacc"] is None  # no inner search, so no dev score
    assert set(result["tasks"]["MRPC"]) >= {"acc", "f1"} and "skipped" in result["tasks"]["SUBJ"]
    markdown = (out / "transfer.md").read_text()
    assert "| MRPC |" in markdown and "SUBJ | skipped" in markdown


@pytest.mark.slow
def test_cli_with_tiny_model(tmp_path):
    """The real encoder path under both protocols; CR holds an empty line, which SentEval keeps."""
    root = make_senteval(tmp_path / "data", n=12, tasks=("CR",))
    common = ["--model", "tiny", "--data-dir", str(root), "--tasks", "CR", "--kfold", "2", "--max-length", "16"]
    senteval = main(common + ["--output", str(tmp_path / "a"), "--setting", "prototyping"])
    sklearn = main(common + ["--output", str(tmp_path / "b"), "--protocol", "sklearn", "--inner-kfold", "0"])
    assert 0 <= senteval["tasks"]["CR"]["acc"] <= 100 and 0 <= sklearn["tasks"]["CR"]["acc"] <= 100
    assert (senteval["tasks"]["CR"]["n"], sklearn["tasks"]["CR"]["n"]) == (26, 24)  # 2 empty lines kept / dropped
    assert "Protocol: **senteval**" in (tmp_path / "a" / "transfer.md").read_text()
    assert "Protocol: **sklearn**" in (tmp_path / "b" / "transfer.md").read_text()


def test_unconverged_fits_are_counted(tmp_path, monkeypatch):
    from sklearn.linear_model import LogisticRegression

    import evaluation.benchmarks.senteval.protocols as protocols

    monkeypatch.setattr(protocols, "_logreg", lambda C, seed: LogisticRegression(C=C, max_iter=1))
    root = make_senteval(tmp_path, n=10, tasks=("MR",))
    result = evaluate_transfer(random_encoder, root, tasks=["MR"], kfold=2, inner_kfold=0, protocol="sklearn")
    assert result["tasks"]["MR"]["unconverged_fits"] == 2


def test_cli_takes_a_checkpoint_like_every_evaluation_cli(tmp_path):
    """--model goes through evaluation.model_io.load: a .ckpt of a run is evaluated with its own eval pooling."""
    from lightning_modules.simcse.module import SimCSE

    module = SimCSE(backbone="tiny", chunk_tokens=CHUNKS)
    path = tmp_path / "m.ckpt"
    torch.save({"state_dict": module.state_dict(), "hyper_parameters": dict(module.hparams)}, path)
    root = make_senteval(tmp_path / "data", n=8, tasks=("MR",))
    result = main(["--model", str(path), "--data-dir", str(root), "--output", str(tmp_path / "out"), "--tasks", "MR",
                   "--protocol", "sklearn", "--kfold", "2", "--inner-kfold", "0", "--max-length", "16"])
    assert result["settings"]["model"] == str(path) and result["settings"]["pooling"] == "cls_before_pooler"
    assert 0 <= result["tasks"]["MR"]["acc"] <= 100
