"""evaluation/benchmarks/senteval/toolkit.py: the message when SentEval is absent, and the adapter around a fake
SentEval."""

from __future__ import annotations

import sys
import types

import numpy as np
import pytest

from ctclust.commands.transfer import main
from evaluation.benchmarks.senteval import toolkit
from evaluation.benchmarks.transfer import evaluate_transfer, to_markdown
from tests.evaluation.benchmarks.test_senteval_protocol import README_CLASSIFIER, README_KFOLD
from tests.evaluation.benchmarks.test_transfer import keyword_encoder, make_senteval


@pytest.fixture
def no_senteval(monkeypatch):
    monkeypatch.setitem(sys.modules, "senteval", None)  # import senteval fails, installed or not


def test_absent_senteval_is_a_user_error_with_install_instructions(no_senteval):
    with pytest.raises(toolkit.SentEvalNotInstalled, match="not installed") as caught:
        toolkit.import_senteval()
    message = str(caught.value)
    assert "github.com/facebookresearch/SentEval" in message and "pip install -e SentEval" in message
    assert "--protocol senteval" in message


def test_cli_reports_absent_senteval_in_one_line_before_loading_a_model(no_senteval, tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["--model", "no-such-model", "--data-dir", str(tmp_path), "--protocol", "senteval-toolkit"])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: SentEval is not installed") and "\n" not in err


def test_evaluate_model_reports_absent_senteval_before_loading_a_model(no_senteval, capsys):
    from ctclust.commands.evaluate import main as evaluate_main

    # 'no-such-model' would fail to load: the SentEval error shows the check runs first
    argv = ["--model", "no-such-model", "--tasks", "transfer", "--transfer-protocol", "senteval-toolkit"]
    try:
        evaluate_main(argv)
    except SystemExit as stop:  # a main that reports user errors itself
        assert stop.code == 2 and "SentEval is not installed" in capsys.readouterr().err
    except toolkit.SentEvalNotInstalled:
        pass
    else:
        pytest.fail("evaluate_model ran without SentEval installed")


class FakeSE:
    """The part of senteval.engine.SE the adapter uses: SE(params, batcher, prepare).eval(name)."""

    instances: list["FakeSE"] = []

    def __init__(self, params, batcher, prepare):
        self.params, self.batcher, self.prepare = params, batcher, prepare
        self.calls: list[str] = []
        FakeSE.instances.append(self)

    def eval(self, name):
        self.calls.append(name)
        # what SentEval hands the callbacks: token lists, bytes tokens possible, an empty sentence
        batch = [["A", "man", "plays", "alpha"], [b"caf\xc3\xa9", "beta"], []]
        assert self.prepare(self.params, batch) is None
        self.embeddings = self.batcher(self.params, batch)
        out = {"devacc": 81.5, "acc": 80.25, "ndev": 3, "ntest": 3}
        if name == "MRPC":
            out.update(f1=77.7, ndev=10, ntest=4)
        return out


@pytest.fixture
def fake_senteval(monkeypatch):
    package = types.ModuleType("senteval")
    package.__version__ = "fake-0.1"
    engine = types.ModuleType("senteval.engine")
    engine.SE = FakeSE
    package.engine = engine
    monkeypatch.setitem(sys.modules, "senteval", package)
    monkeypatch.setitem(sys.modules, "senteval.engine", engine)
    FakeSE.instances.clear()
    return engine


def test_adapter_hands_our_encoder_to_sentevals_engine(fake_senteval, tmp_path):
    root = make_senteval(tmp_path / "downstream", n=4, tasks=("MR", "MRPC"))
    seen = []

    def encode(texts):
        seen.append(list(texts))
        return keyword_encoder(texts)

    with pytest.warns(UserWarning, match="TREC skipped"):
        result = evaluate_transfer(
            encode,
            root,
            tasks=["MR", "MRPC", "TREC"],
            protocol="senteval-toolkit",
            setting="prototyping",
            toolkit_classifier="sklearn",
            batch_size=32,
        )
    (se,) = FakeSE.instances
    assert se.calls == ["MR", "MRPC"]  # TREC's folder is absent: skipped, as the other protocols do
    assert se.params == {
        "task_path": str(tmp_path),
        "usepytorch": False,
        "kfold": README_KFOLD["prototyping"],
        "seed": 1111,
        "batch_size": 32,
        "classifier": README_CLASSIFIER["prototyping"],
    }
    assert seen[0] == ["A man plays alpha", "café beta", ""]  # tokens joined with spaces, bytes decoded
    assert se.embeddings.dtype == np.float32 and se.embeddings.shape == (3, 24)
    assert np.allclose(se.embeddings, keyword_encoder(seen[0]))
    mr, mrpc = result["tasks"]["MR"], result["tasks"]["MRPC"]
    assert (mr["acc"], mr["devacc"], mr["n"], mr["protocol"]) == (80.25, 81.5, 3, "SentEval InnerKFoldClassifier")
    assert (mrpc["f1"], mrpc["n_train"], mrpc["n_test"]) == (77.7, 10, 4)
    assert "skipped" in result["tasks"]["TREC"] and result["avg_over"] == ["MR", "MRPC"]
    assert result["protocol"] == "senteval-toolkit"
    text = to_markdown(result)
    assert "Protocol: **senteval-toolkit**" in text and "SentEval fake-0.1, usepytorch=False" in text


def test_adapter_needs_sentevals_downstream_folder_and_rejects_our_own_options(fake_senteval, tmp_path):
    with pytest.raises(toolkit.senteval_classifier.ProbeSettingsError, match="must be named 'downstream'"):
        evaluate_transfer(keyword_encoder, tmp_path / "data", tasks=["MR"], protocol="senteval-toolkit")
    with pytest.raises(ValueError, match="max_train"):
        evaluate_transfer(keyword_encoder, tmp_path, tasks=["MR"], protocol="senteval-toolkit", max_train=10)


def test_batcher_rejects_a_wrong_shape():
    _, batcher = toolkit.make_prepare_and_batcher(lambda texts: np.zeros((len(texts) + 1, 4)))
    with pytest.raises(ValueError, match="encode returned shape"):
        batcher({}, [["a"], ["b"]])
