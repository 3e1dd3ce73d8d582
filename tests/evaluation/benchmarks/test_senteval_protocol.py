"""SentEval's PyTorch transfer protocol: evaluation/benchmarks/senteval/classifier.py and its use in
evaluation/benchmarks/transfer.py."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn

from evaluation.benchmarks.senteval import classifier as sc
from evaluation.benchmarks.senteval.protocols import TransferOptionsError
from evaluation.benchmarks.senteval.readers import read_binary, read_sick_entailment, senteval_order
from evaluation.benchmarks.transfer import check_transfer_options, evaluate_transfer, to_markdown
from tests.evaluation.benchmarks.test_transfer import keyword_encoder, make_senteval, write_lines
from tests.helpers.speed import KMEANS


def blobs(n: int, seed: int, dim: int = 8) -> tuple[np.ndarray, np.ndarray]:
    """Two classes 12 standard deviations apart along the first axis: linearly separable."""
    rng = np.random.default_rng(seed)
    y = np.arange(n) % 2
    X = 0.5 * rng.normal(size=(n, dim))
    X[:, 0] += np.where(y == 1, 3.0, -3.0)
    return X.astype(np.float32), y


def shared_noise(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """x1 = s + e, x2 = e with a large shared e: only the direction (1, -1) recovers s exactly.

    Heavy weight decay pulls the weights towards the class-mean difference (1, 0), which reads
    s + e and is right only about 63 % of the time; light decay learns (1, -1).
    """
    rng = np.random.default_rng(seed)
    s = rng.choice([-1.0, 1.0], size=n)
    e = 3.0 * rng.normal(size=n)
    return np.stack([s + e, e], axis=1).astype(np.float32), (s > 0).astype(np.int64)


# -- settings ------------------------------------------------------------------------------------
# SentEval README: prototyping {kfold 5; nhid 0, rmsprop, batch 128, tenacity 3, epoch_size 2},
# default {kfold 10; nhid 0, adam, batch 64, tenacity 5, epoch_size 4}; MLP's max_epoch 200, dropout 0
README_KFOLD = {"default": 10, "prototyping": 5}
README_CLASSIFIER = {  # SentEval's params.classifier
    "default": {"optim": "adam", "batch_size": 64, "tenacity": 5, "epoch_size": 4, "max_epoch": 200, "nhid": 0,
                "dropout": 0.0},
    "prototyping": {"optim": "rmsprop", "batch_size": 128, "tenacity": 3, "epoch_size": 2, "max_epoch": 200,
                    "nhid": 0, "dropout": 0.0},
}


def test_settings_are_sentevals_documented_configurations():
    for name in ("default", "prototyping"):
        assert sc.SETTINGS[name].as_dict() == {"kfold": README_KFOLD[name], **README_CLASSIFIER[name]}, name
    assert sc.L2_GRID == (1e-5, 1e-4, 1e-3, 1e-2) and sc.FOLD_SEED == 1111 and sc.VALIDATION_SPLIT == 0.05


def test_the_transfer_tool_offers_exactly_the_classifier_settings():
    """The tool's --setting choices are named without importing the classifier (torch): the same names."""
    from evaluation.benchmarks.senteval.tasks import SETTING_NAMES

    assert SETTING_NAMES == tuple(sc.SETTINGS)


def test_probe_settings_overrides_and_bad_values():
    assert sc.probe_settings("prototyping", {"kfold": 3, "optim": None}).kfold == 3
    with pytest.raises(sc.ProbeSettingsError, match="unknown SentEval classifier setting 'fast'"):
        sc.probe_settings("fast")
    with pytest.raises(sc.ProbeSettingsError, match=r"unknown classifier setting\(s\) \['epochs'\]"):
        sc.probe_settings("default", {"epochs": 3})
    with pytest.raises(sc.ProbeSettingsError, match="kfold=1"):
        sc.probe_settings("default", {"kfold": 1})


def test_optimizer_strings():
    assert sc.parse_optimizer("adam") == (torch.optim.Adam, {})
    assert sc.parse_optimizer("sgd,lr=0.1") == (torch.optim.SGD, {"lr": 0.1})
    assert sc.parse_optimizer("rmsprop,lr=0.001,alpha=0.9") == (torch.optim.RMSprop, {"lr": 0.001, "alpha": 0.9})
    for spec, message in (
        ("sgd", "needs a learning rate"),
        ("adam,momentum=0.9", "adam takes no 'momentum'"),
        ("adam,lr=fast", "not key=number"),
        ("rprop", "unknown optimiser 'rprop'"),
    ):
        with pytest.raises(sc.ProbeSettingsError, match=message):
            sc.parse_optimizer(spec)


# -- the classifier ------------------------------------------------------------------------------
def test_early_stopping_counts_misses_over_the_whole_run():
    stopper = sc.EarlyStopping(tenacity=2)
    steps = [stopper.update(a) for a in (0.5, 0.6, 0.6, 0.55, 0.7, 0.7)]
    # misses: 0.6 (1st), 0.55 (2nd); 0.7 improves but does not reset; the next miss is the 3rd: stop
    assert steps == [(True, False), (True, False), (False, False), (False, False), (True, False), (False, True)]
    assert stopper.best == 0.7


def test_training_length_follows_max_epoch_and_epoch_size():
    X, y = blobs(200, seed=0)
    settings = sc.probe_settings("default", {"max_epoch": 5, "epoch_size": 2, "tenacity": 100})
    probe = sc.LinearProbe(8, 2, 1e-5, settings)
    probe.fit(X, y, validation_split=0.1)
    # rounds start while passes <= 5: after 0, 2 and 4 passes, so 3 rounds and 6 passes
    assert (probe.rounds, probe.passes) == (3, 6)


def test_initial_weights_are_sentevals_and_global_generators_untouched():
    torch.manual_seed(123)
    np.random.seed(5)
    torch_state, numpy_state = torch.get_rng_state(), np.random.get_state()[1].copy()
    probe = sc.LinearProbe(6, 3, 1e-4, seed=77)
    probe.fit(*blobs(60, seed=1, dim=6), validation_split=0.1)
    assert torch.equal(torch.get_rng_state(), torch_state)
    assert np.array_equal(np.random.get_state()[1], numpy_state)
    torch.manual_seed(77)  # what SentEval does before building nn.Linear
    reference = nn.Linear(6, 3)
    fresh = sc.LinearProbe(6, 3, 1e-4, seed=77)
    assert torch.equal(fresh.model[0].weight, reference.weight) and torch.equal(fresh.model[0].bias, reference.bias)


def test_validation_split_holds_out_sentevals_rows():
    X, y = blobs(100, seed=2)
    probe = sc.LinearProbe(8, 2, 1e-4, seed=1111)
    probe.fit(X, y, validation_split=0.05)
    # SentEval: np.random.seed(1111) at construction, then permutation(n)[: int(0.05 n)] is the dev part
    assert probe.validation_rows.tolist() == np.random.RandomState(1111).permutation(100)[:5].tolist()


def test_same_seed_gives_the_same_classifier():
    X, y = blobs(300, seed=3)

    def weights(seed):
        probe = sc.LinearProbe(8, 2, 1e-4, seed=seed)
        probe.fit(X, y, validation_split=0.05)
        return probe.model[0].weight.detach().clone()

    assert torch.equal(weights(5), weights(5)) and not torch.equal(weights(5), weights(6))


def test_separable_problem_reaches_100_percent():
    X, y = blobs(1300, seed=4)
    X_test, y_test = blobs(500, seed=5)
    probe = sc.LinearProbe(8, 2, 1e-5)  # SentEval's default setting
    assert probe.fit(X, y, validation_split=0.05) == 1.0
    assert probe.score(X_test, y_test) == 1.0 and (probe.predict(X_test) == y_test).all()


def test_heavy_weight_decay_loses_and_the_choice_comes_from_the_grid():
    splits = {name: shared_noise(n, seed) for name, n, seed in (("train", 1000, 6), ("dev", 300, 7), ("test", 300, 8))}
    X = {name: s[0] for name, s in splits.items()}
    y = {name: s[1] for name, s in splits.items()}
    out = sc.Schemes(grid=(10.0, 1e-5)).split(X, y, 2)  # heavy decay listed first: the choice is by score
    assert list(out["l2_scores"]) == [10.0, 1e-5]
    assert out["l2_scores"][10.0] < 80 and out["l2_scores"][1e-5] > 95
    assert out["l2"] == 1e-5 and out["devacc"] == out["l2_scores"][1e-5] and out["acc"] > 95


def test_grid_scores_are_rounded_means_and_ties_go_to_the_first(monkeypatch):
    calls = []

    def fake_fold_accuracy(X, y, train, held, n_classes, l2, settings, seed):
        calls.append((l2, len(held)))
        return {1e-5: 0.5, 1e-4: 0.8, 1e-3: 0.8, 1e-2: 0.123456}[l2]

    monkeypatch.setattr(sc, "_fold_accuracy", fake_fold_accuracy)
    y = np.array([0, 1] * 6)
    folds = sc.stratified_folds(y, 3, 0)
    scores = sc.grid_scores(np.zeros((12, 2)), y, 2, folds, sc.L2_GRID, sc.SETTINGS["default"], 1)
    assert scores == [50.0, 80.0, 80.0, 12.35] and int(np.argmax(scores)) == 1
    assert len(calls) == 4 * 3 and {n for _, n in calls} == {4}


# -- folds and order -----------------------------------------------------------------------------
def test_folds_are_stratified_kfold_shuffled_with_the_seed():
    y = np.array([0] * 10 + [1] * 10)
    # built by hand from StratifiedKFold's definition: per class (in order of first appearance) the
    # fold numbers 0..4, each repeated for its 2 rows of that class, shuffled by RandomState(1111)
    rng = np.random.RandomState(1111)
    fold_of = np.empty(20, dtype=int)
    for rows in (np.arange(10), np.arange(10, 20)):
        numbers = np.repeat(np.arange(5), 2)
        rng.shuffle(numbers)
        fold_of[rows] = numbers
    folds = sc.stratified_folds(y, 5, 1111)
    assert [held.tolist() for _, held in folds] == [np.flatnonzero(fold_of == i).tolist() for i in range(5)]
    assert all(sorted(train.tolist() + held.tolist()) == list(range(20)) for train, held in folds)
    again = sc.stratified_folds(y, 5, 1111)
    assert all(np.array_equal(a[1], b[1]) for a, b in zip(folds, again))
    assert not all(np.array_equal(a[1], b[1]) for a, b in zip(folds, sc.stratified_folds(y, 5, 1112)))


def test_cv_tasks_use_fold_seed_1111_whatever_the_seed(monkeypatch):
    seen = []
    real = sc.stratified_folds
    monkeypatch.setattr(sc, "stratified_folds", lambda y, k, seed: seen.append((len(y), k, seed)) or real(y, k, seed))
    monkeypatch.setattr(sc, "_fold_accuracy", lambda *args: 1.0)
    monkeypatch.setattr(sc.LinearProbe, "fit", lambda self, *a, **k: 1.0)
    X, y = blobs(12, seed=0)
    sc.Schemes(sc.probe_settings("default", {"kfold": 2}), seed=5).inner_kfold(X, y, 2)
    assert seen == [(12, 2, 1111), (6, 2, 1111), (6, 2, 1111)]  # outer, then inner per outer fold
    seen.clear()
    sc.Schemes(sc.probe_settings("default", {"kfold": 3}), seed=5).kfold_test(X, y, X, y, 2)
    assert seen == [(12, 3, 5)]  # KFoldClassifier: the task seed


def test_senteval_order_sorts_by_token_count_then_label(tmp_path):
    write_lines(tmp_path / "MR" / "rt-polarity.pos", ["a b c", "", "d e", "f g"], "latin-1")
    write_lines(tmp_path / "MR" / "rt-polarity.neg", ["h i", "j"], "latin-1")
    data = read_binary(tmp_path / "MR", "MR", keep_empty=True)
    assert data.texts == ["a b c", "", "d e", "f g", "h i", "j"]
    assert len(read_binary(tmp_path / "MR", "MR")) == 5  # the scikit-learn protocol drops the empty line
    ordered = senteval_order(data)
    # (tokens, label): ("",0 tok,1) ("j",1,0) ("h i",2,0) ("d e",2,1) ("f g",2,1) ("a b c",3,1); ties stay in file order
    assert ordered.texts == ["", "j", "h i", "d e", "f g", "a b c"]
    assert ordered.labels.tolist() == [1, 0, 0, 1, 1, 1]


# -- the protocol inside evaluate_transfer -------------------------------------------------------
def make_sick(root, n: int = 20):
    """SICK-E files whose second sentence carries the class keyword (alpha/beta/abbr)."""
    header = "pair_ID\tsentence_A\tsentence_B\trelatedness_score\tentailment_judgment"
    for name, m in (("SICK_train.txt", n), ("SICK_trial.txt", n // 2), ("SICK_test_annotated.txt", n // 2)):
        rows = [header]
        for i in range(m):
            for label, word in (("CONTRADICTION", "alpha"), ("NEUTRAL", "beta"), ("ENTAILMENT", "abbr")):
                rows.append(f"{i}\tpair {i} here\tpair {i} here {word}\t3.5\t{label}")
        write_lines(root / "SICK" / name, rows)
    return root


def test_sick_entailment_reader(tmp_path):
    splits = read_sick_entailment(make_sick(tmp_path, n=4) / "SICK")
    assert {k: len(v) for k, v in splits.items()} == {"train": 12, "dev": 6, "test": 6}
    assert splits["train"].labels.tolist()[:3] == [0, 1, 2] and splits["train"].texts_b[2] == "pair 0 here abbr"


@pytest.mark.parametrize("task", ["MR", "TREC", "MRPC", "SICKE"])
def test_senteval_protocol_end_to_end_on_separable_tasks(tmp_path, task):
    root = make_senteval(tmp_path, n=60, tasks=(task,))
    if task == "SICKE":
        make_sick(root, n=60)
    settings = {"kfold": 2, "setting": "prototyping", "classifier": {"optim": "rmsprop,lr=0.05"}}
    result = evaluate_transfer(keyword_encoder, root, tasks=[task], **settings)
    scores = result["tasks"][task]
    assert scores["acc"] == 100.0, scores
    chosen = scores["l2"] if isinstance(scores["l2"], list) else [scores["l2"]]
    assert set(chosen) <= set(sc.L2_GRID)
    assert result["protocol"] == "senteval" and result["settings"]["seed"] == 1111
    assert result["settings"]["classifier"]["optim"] == "rmsprop,lr=0.05"
    if task in ("MRPC", "SICKE"):
        assert scores["features"] == "senteval"


def test_markdown_names_the_protocol(tmp_path):
    root = make_senteval(tmp_path, n=20, tasks=("MR",))
    senteval = evaluate_transfer(keyword_encoder, root, tasks=["MR"], kfold=2, classifier={"max_epoch": 4})
    sklearn = evaluate_transfer(keyword_encoder, root, tasks=["MR"], kfold=2, protocol="sklearn", max_train=30)
    text = to_markdown(senteval)
    assert "Protocol: **senteval**, SentEval PyTorch logistic regression" in text and "setting `default`" in text
    assert "| MR |" in text and "L2 " in text and "(senteval)" in text
    text = to_markdown(sklearn)
    assert "Protocol: **sklearn**, scikit-learn logistic regression" in text and "| MR |" in text
    assert "subsampled to at most 30" in text and "C " in text


def test_transfer_options_are_checked_before_any_work():
    check_transfer_options({"protocol": "senteval", "setting": "prototyping", "tasks": ["MR", "SICKE"]})
    check_transfer_options({"protocol": "sklearn", "kfold": 5, "inner_kfold": 0})
    for options, message in (
        ({"protocol": "liblinear"}, "unknown transfer protocol 'liblinear'"),
        ({"folds": 3}, r"unknown transfer option\(s\) \['folds'\]"),
        ({"tasks": ["MR", "SST5"]}, r"unknown transfer task\(s\) \['SST5'\]"),
        ({"protocol": "senteval", "kfold": 10, "inner_kfold": 5}, "same k as the outer one"),
        ({"protocol": "sklearn", "setting": "prototyping"}, "sklearn protocol has no classifier settings"),
        ({"setting": "prototyping", "classifier": {"optim": "sgd"}}, "sgd needs a learning rate"),
        ({"jobs": 0}, "jobs=0"),
        ({"max_train": 0}, "max_train=0"),
    ):
        with pytest.raises((TransferOptionsError, sc.ProbeSettingsError), match=message):
            check_transfer_options(options)


@pytest.mark.slow
def test_parallel_folds_give_the_same_numbers():
    X, y = blobs(120, seed=9)
    settings = sc.probe_settings("prototyping", {"kfold": 2})
    assert sc.Schemes(settings, n_jobs=1).inner_kfold(X, y, 2) == sc.Schemes(settings, n_jobs=2).inner_kfold(X, y, 2)


# -- evaluate_model and the end-of-training callback ---------------------------------------------
class KeywordTextEncoder(nn.Module):
    """Stands in for TextEncoder: the keyword features, as evaluate_encoder calls them."""

    def __init__(self):
        super().__init__()
        self.anchor = nn.Parameter(torch.zeros(1))  # weights to fingerprint for the embedding cache
        self.max_length, self.pooling, self.dim = 32, "mean", 24

    def encode(self, texts, batch_size=128, pooling=None):
        return torch.from_numpy(keyword_encoder(list(texts))).float()


def test_evaluate_model_names_the_transfer_protocol_in_tables_and_headline_rows(tmp_path):
    from evaluation.benchmarks.encoder_evaluation import compare, evaluate_encoder, to_markdown

    root = make_senteval(tmp_path, n=20, tasks=("TREC",))
    results = {
        protocol: evaluate_encoder(
            KeywordTextEncoder(),
            "mean",
            ["transfer"],
            senteval_dir=root,
            transfer_options={"tasks": ["TREC"], "kfold": 2, "protocol": protocol, **extra},
        )
        for protocol, extra in (("senteval", {"setting": "prototyping"}), ("sklearn", {}))
    }
    text = to_markdown(results["senteval"], "fake")
    assert "## Transfer (SentEval tasks, protocol senteval)" in text and "Protocol: **senteval**" in text
    table = compare([results["senteval"], results["sklearn"]], ["a", "b"])
    # one row per protocol: numbers of different protocols never share a row
    assert "| transfer TREC (senteval) | " in table and "| transfer TREC (sklearn) | - | " in table


def test_final_evaluation_checks_transfer_options_before_training():
    from callbacks.evaluation.final_eval import FinalEvaluation

    FinalEvaluation(tasks=["transfer"], transfer_options={"protocol": "sklearn", "kfold": 3})
    # transfer not asked for
    FinalEvaluation(tasks=["clustering"], transfer_options={"protocol": "nonsense"}, kmeans_backend=KMEANS)
    with pytest.raises(TransferOptionsError, match="unknown transfer protocol 'nonsense'"):
        FinalEvaluation(tasks=["transfer"], transfer_options={"protocol": "nonsense"})
