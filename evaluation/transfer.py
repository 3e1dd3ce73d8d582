"""SentEval transfer tasks on frozen sentence embeddings (docs/evaluation.md), under a named protocol.

Tasks: MR, CR, SUBJ, MPQA, SST-2, TREC, MRPC (the seven of the SimCSE, PairSupCon and ClusterNS
tables) and, when asked for, SICK-E (``SICKE``). Three protocols; every table and JSON file says
which one produced its numbers:

- ``senteval`` (the default): SentEval's PyTorch logistic regression (``usepytorch=True``), the
  protocol behind the papers' transfer tables, in our own code (``evaluation.senteval_classifier``):
  a linear layer on the embeddings, weight decay from {1e-5, 1e-4, 1e-3, 1e-2} chosen by
  cross-validation, early stopping on held-out data, SentEval's folds (``StratifiedKFold`` with
  shuffle and seed 1111 on the rows in SentEval's order: sorted by token count then label, pairs
  by the token counts of both sentences then label) and SentEval's ``default`` setting (10-fold,
  Adam, batch 64, epoch_size 4, tenacity 5) or ``prototyping`` setting (5-fold, RMSprop, batch
  128, epoch_size 2, tenacity 3). As in SentEval, empty lines of MR/CR/SUBJ/MPQA are kept and
  embedded as empty sentences (CR 3,775 and MPQA 10,606 examples).
- ``sklearn``: scikit-learn logistic regression with the grids of SentEval's ``usepytorch=False``
  path (below). Not what the papers report.
- ``senteval-toolkit``: the SentEval package itself, when installed, with our encoder as its
  batcher (``evaluation.senteval_toolkit``).

Validation per task (``senteval`` and ``sklearn``):

- MR, CR, SUBJ, MPQA (one pool of labelled sentences): stratified k-fold CV; in each outer fold the
  regulariser comes from an inner stratified k-fold on the training part; accuracy is the mean
  over the outer test folds.
- SST-2, SICK-E (train/dev/test): regulariser by dev accuracy, test accuracy.
- TREC (train/test, 6 coarse classes, the label before ':') and MRPC (train/test sentence pairs):
  regulariser by k-fold CV on train, refit on all of train, test accuracy; MRPC also the F1 of the
  paraphrase class.
- MRPC and SICK-E features: ``[|u-v|, u*v]`` (SentEval; ``mrpc_features="senteval"``, the
  default); ``mrpc_features="full"`` uses ``[u, v, |u-v|, u*v]`` (InferSent's NLI features).

The ``sklearn`` protocol: the L2 strength C from {2^-2 .. 2^3} (CV tasks, SST-2, SICK-E) or
{2^-1 .. 2^5} (TREC, MRPC); ``kfold`` is 10 by default (docs/evaluation.md; SentEval's own default is 5) and
``inner_kfold=0`` skips the inner search (C = 1, not SentEval). Differences from SentEval's
scikit-learn path, all deliberate: empty lines are dropped (CR 3,771 and MPQA 10,603 examples)
and the folds use ``seed`` (default 0; SentEval 1111) on the file order. The solver is lbfgs,
scikit-learn's default since 0.22 and so what SentEval's scikit-learn path runs today (checked:
the same test predictions on TREC and MRPC with minilm). It is not the model of the liblinear
solver that scikit-learn used when SentEval was written: liblinear also penalises the intercept
and fits TREC's six classes one-vs-rest, lbfgs fits one multinomial model with a free intercept,
and the predictions differ: at C = 0.5, liblinear changes 16 of the 500 TREC test predictions
(89.80 % accuracy) and 5 of the 1,725 MRPC ones (minilm embeddings).

``max_train`` (optional) draws a stratified random subsample of at most that many training
examples (for MR/CR/SUBJ/MPQA: of the whole CV pool) for quick CPU runs; it is recorded in the
output, and results with it are not comparable to published numbers.

File encodings follow SentEval: Latin-1 for MR/CR/SUBJ/MPQA/TREC (TREC's train file is
Latin-1), UTF-8 for SST-2 and SICK, UTF-8 with an optional BOM for MRPC (whose first line is a
header).
"""

from __future__ import annotations

import argparse
import functools
import inspect
import json
import logging
import time
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Sequence

import numpy as np
from sklearn.exceptions import ConvergenceWarning
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import f1_score
from sklearn.model_selection import StratifiedKFold, train_test_split
from threadpoolctl import threadpool_limits

from errors import UserError, exit_on_user_error
from evaluation import senteval_classifier
from evaluation.transfer_tasks import PROTOCOL_NAMES, PROTOCOLS, TASK_FOLDERS, summarise

TASKS = ("MR", "CR", "SUBJ", "MPQA", "SST2", "TREC", "MRPC")  # the papers' seven, the default list
ALL_TASKS = TASKS + ("SICKE",)
CV_TASKS = ("MR", "CR", "SUBJ", "MPQA")
PAIR_TASKS = ("MRPC", "SICKE")

# (file of label 1, file of label 0); SentEval labels SUBJ's objective sentences 1
BINARY_FILES = {
    "MR": ("rt-polarity.pos", "rt-polarity.neg"),
    "CR": ("custrev.pos", "custrev.neg"),
    "SUBJ": ("subj.objective", "subj.subjective"),
    "MPQA": ("mpqa.pos", "mpqa.neg"),
}
TREC_CLASSES = ("ABBR", "DESC", "ENTY", "HUM", "LOC", "NUM")
SICK_LABELS = ("CONTRADICTION", "NEUTRAL", "ENTAILMENT")  # SentEval's ids 0, 1, 2
C_GRID_SPLIT = tuple(2.0**t for t in range(-2, 4))  # SentEval InnerKFold / Split classifiers
C_GRID_KFOLD = tuple(2.0**t for t in range(-1, 6))  # SentEval KFoldClassifier (TREC, MRPC)
MRPC_FEATURES = ("senteval", "full")

Encode = Callable[[list[str]], np.ndarray]
log = logging.getLogger(__name__)


class TransferDataError(UserError, ValueError):
    """A SentEval file is missing or malformed; the message names the file and line."""


@dataclass
class Split:
    texts: list[str]  # for MRPC: the first sentences
    labels: np.ndarray  # [n] int
    texts_b: list[str] | None = None  # MRPC: the second sentences

    def __len__(self) -> int:
        return len(self.texts)

    def subset(self, idx: np.ndarray) -> "Split":
        pick = lambda xs: [xs[i] for i in idx]  # noqa: E731
        return Split(pick(self.texts), self.labels[idx], pick(self.texts_b) if self.texts_b is not None else None)


# -- readers -------------------------------------------------------------------------------------
def _lines(path: Path, encoding: str) -> list[str]:
    if not path.is_file():
        raise TransferDataError(f"SentEval file '{path}' is missing; the task folder is incomplete.")
    with open(path, encoding=encoding, newline="") as f:
        return f.read().splitlines()


def _clean(text: str) -> str:
    # SentEval tokenises on whitespace and joins with one space
    return " ".join(text.split())


def read_binary(folder: Path, task: str, keep_empty: bool = False) -> Split:
    """MR/CR/SUBJ/MPQA: one sentence per line, label from the file (label-1 file first); empty
    lines dropped unless ``keep_empty`` (SentEval keeps them)."""
    texts, labels = [], []
    for label, name in zip((1, 0), BINARY_FILES[task]):
        kept = [_clean(line) for line in _lines(folder / name, "latin-1")]
        kept = [t for t in kept if t or keep_empty]
        texts += kept
        labels += [label] * len(kept)
    return Split(texts, np.asarray(labels, dtype=np.int64))


def read_sst2(folder: Path) -> dict[str, Split]:
    out = {}
    for split in ("train", "dev", "test"):
        path = folder / f"sentiment-{split}"
        texts, labels = [], []
        for line_no, line in enumerate(_lines(path, "utf-8"), start=1):
            if not line.strip():
                continue
            text, _, label = line.rpartition("\t")
            if label.strip() not in ("0", "1") or not text:
                raise TransferDataError(f"{path} line {line_no}: expected 'sentence<TAB>0|1', got {line[:80]!r}.")
            texts.append(_clean(text))
            labels.append(int(label))
        out[split] = Split(texts, np.asarray(labels, dtype=np.int64))
    return out


def read_trec(folder: Path) -> dict[str, Split]:
    """``COARSE:fine question`` per line; the label is the coarse class (6 classes)."""
    out = {}
    for split, name in (("train", "train_5500.label"), ("test", "TREC_10.label")):
        path = folder / name
        texts, labels = [], []
        for line_no, line in enumerate(_lines(path, "latin-1"), start=1):
            if not line.strip():
                continue
            coarse, _, rest = line.strip().partition(":")
            _, _, question = rest.partition(" ")
            if coarse not in TREC_CLASSES or not question.strip():
                raise TransferDataError(
                    f"{path} line {line_no}: expected 'CLASS:fine question' with CLASS in {TREC_CLASSES}, "
                    f"got {line[:80]!r}."
                )
            texts.append(_clean(question))
            labels.append(TREC_CLASSES.index(coarse))
        out[split] = Split(texts, np.asarray(labels, dtype=np.int64))
    return out


def read_mrpc(folder: Path) -> dict[str, Split]:
    """Tab-separated with a header (Quality, #1 ID, #2 ID, #1 String, #2 String); BOM allowed."""
    out = {}
    for split in ("train", "test"):
        path = folder / f"msr_paraphrase_{split}.txt"
        lines = _lines(path, "utf-8-sig")
        header = lines[0].split("\t") if lines else []
        needed = ("Quality", "#1 String", "#2 String")
        if not set(needed) <= set(header):
            raise TransferDataError(f"{path}: header has columns {header}; expected {list(needed)} among them.")
        iq, ia, ib = (header.index(c) for c in needed)
        a, b, labels = [], [], []
        for line_no, line in enumerate(lines[1:], start=2):
            if not line.strip():
                continue
            fields = line.split("\t")
            if len(fields) < len(header) or fields[iq] not in ("0", "1"):
                raise TransferDataError(
                    f"{path} line {line_no}: expected {len(header)} tab-separated fields with Quality 0|1."
                )
            a.append(_clean(fields[ia]))
            b.append(_clean(fields[ib]))
            labels.append(int(fields[iq]))
        out[split] = Split(a, np.asarray(labels, dtype=np.int64), b)
    return out


def read_sick_entailment(folder: Path) -> dict[str, Split]:
    """SICK-E: tab-separated with a header (pair_ID, sentence_A, sentence_B, relatedness_score,
    entailment_judgment); train ``SICK_train.txt``, dev ``SICK_trial.txt``, test
    ``SICK_test_annotated.txt``; labels as SentEval: CONTRADICTION 0, NEUTRAL 1, ENTAILMENT 2."""
    out = {}
    for split, name in (("train", "SICK_train.txt"), ("dev", "SICK_trial.txt"), ("test", "SICK_test_annotated.txt")):
        path = folder / name
        lines = _lines(path, "utf-8")
        header = lines[0].split("\t") if lines else []
        needed = ("sentence_A", "sentence_B", "entailment_judgment")
        if not set(needed) <= set(header):
            raise TransferDataError(f"{path}: header has columns {header}; expected {list(needed)} among them.")
        ia, ib, il = (header.index(c) for c in needed)
        a, b, labels = [], [], []
        for line_no, line in enumerate(lines[1:], start=2):
            if not line.strip():
                continue
            fields = line.split("\t")
            if len(fields) < len(header) or fields[il] not in SICK_LABELS:
                raise TransferDataError(
                    f"{path} line {line_no}: expected {len(header)} tab-separated fields with "
                    f"entailment_judgment in {SICK_LABELS}."
                )
            a.append(_clean(fields[ia]))
            b.append(_clean(fields[ib]))
            labels.append(SICK_LABELS.index(fields[il]))
        out[split] = Split(a, np.asarray(labels, dtype=np.int64), b)
    return out


def senteval_order(split: Split) -> Split:
    """The rows in SentEval's order, which its folds are drawn on: sorted by whitespace token
    count then label (pairs: tokens of the first sentence, of the second, then label); ties keep
    the file order (Python's sort is stable)."""

    def key(i: int):
        label = int(split.labels[i])
        if split.texts_b is None:
            return (len(split.texts[i].split()), label)
        return (len(split.texts[i].split()), len(split.texts_b[i].split()), label)

    return split.subset(np.asarray(sorted(range(len(split)), key=key), dtype=np.int64))


# -- classifiers ---------------------------------------------------------------------------------
def _logreg(C: float, seed: int) -> LogisticRegression:
    return LogisticRegression(C=C, max_iter=2000, random_state=seed)


def cv_select_and_fit(X: np.ndarray, y: np.ndarray, grid: Sequence[float], folds: int, seed: int):
    """Pick C by stratified ``folds``-fold CV accuracy on (X, y), refit on all of it.

    Returns (model, best C, CV accuracy in % at that C); ``folds=0`` fits C = 1 without search
    and returns None as the CV accuracy.
    Within a fold the grid is walked in ascending order from the previous solution (warm
    start): same optimum per C, fewer lbfgs iterations.
    """
    if folds == 0:
        return _logreg(1.0, seed).fit(X, y), 1.0, None
    grid = sorted(grid)
    skf = StratifiedKFold(n_splits=folds, shuffle=True, random_state=seed)
    scores = np.zeros((folds, len(grid)))  # [folds, |grid|] held-out accuracy
    for f, (train_idx, test_idx) in enumerate(skf.split(X, y)):
        model = _logreg(grid[0], seed).set_params(warm_start=True)
        for j, C in enumerate(grid):
            model.set_params(C=C).fit(X[train_idx], y[train_idx])
            scores[f, j] = model.score(X[test_idx], y[test_idx])
    mean = scores.mean(axis=0)  # [|grid|]
    best = int(np.argmax(mean))  # first best, as SentEval's argmax
    return _logreg(grid[best], seed).fit(X, y), float(grid[best]), 100.0 * float(mean[best])


def single_threaded_blas(fn):
    """Logistic-regression fits here are small; multi-threaded OpenBLAS on a busy CPU spins and
    ran 30x slower than one thread in our measurements, so the classifiers use one BLAS thread."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        with threadpool_limits(limits=1, user_api="blas"):
            return fn(*args, **kwargs)

    return wrapper


@single_threaded_blas
def run_inner_kfold(X, y, kfold: int, inner_kfold: int, seed: int) -> dict:
    """MR/CR/SUBJ/MPQA: outer CV for accuracy, inner CV per outer fold for C."""
    outer = StratifiedKFold(n_splits=kfold, shuffle=True, random_state=seed)
    test_acc, dev_acc, chosen = [], [], []
    for train_idx, test_idx in outer.split(X, y):
        model, C, dev = cv_select_and_fit(X[train_idx], y[train_idx], C_GRID_SPLIT, inner_kfold, seed)
        test_acc.append(100.0 * model.score(X[test_idx], y[test_idx]))
        dev_acc.append(dev)
        chosen.append(C)
    return {
        "acc": float(np.mean(test_acc)),
        "acc_std": float(np.std(test_acc)),
        "devacc": float(np.mean(dev_acc)) if inner_kfold else None,
        "C": chosen,
        "protocol": f"{kfold}-fold CV" + (f", C by inner {inner_kfold}-fold CV" if inner_kfold else ", C=1"),
    }


@single_threaded_blas
def run_split(X: dict[str, np.ndarray], y: dict[str, np.ndarray], seed: int) -> dict:
    """SST-2/SICK-E: C by dev accuracy, test accuracy of the model trained on train with that C."""
    best = None
    for C in C_GRID_SPLIT:
        model = _logreg(C, seed).fit(X["train"], y["train"])
        dev = 100.0 * model.score(X["dev"], y["dev"])
        if best is None or dev > best[0]:
            best = (dev, C, model)
    dev, C, model = best
    return {
        "acc": 100.0 * model.score(X["test"], y["test"]),
        "devacc": dev,
        "C": C,
        "protocol": "train/dev/test, C by dev",
    }


@single_threaded_blas
def run_kfold_test(X_train, y_train, X_test, y_test, kfold: int, seed: int, f1: bool = False) -> dict:
    """TREC/MRPC: C by k-fold CV on train, refit on train, evaluate on test."""
    model, C, dev = cv_select_and_fit(X_train, y_train, C_GRID_KFOLD, kfold, seed)
    pred = model.predict(X_test)
    out = {
        "acc": 100.0 * float(np.mean(pred == y_test)),
        "devacc": dev,
        "C": C,
        "protocol": f"train/test, C by {kfold}-fold CV on train",
    }
    if f1:
        out["f1"] = 100.0 * float(f1_score(y_test, pred))
    return out


def pair_features(u: np.ndarray, v: np.ndarray, kind: str = "senteval") -> np.ndarray:
    """[n, 2d] ``[|u-v|, u*v]`` (SentEval MRPC) or [n, 4d] ``[u, v, |u-v|, u*v]``."""
    if kind == "senteval":
        return np.concatenate([np.abs(u - v), u * v], axis=1)
    if kind == "full":
        return np.concatenate([u, v, np.abs(u - v), u * v], axis=1)
    raise ValueError(f"mrpc_features must be one of {MRPC_FEATURES}, got '{kind}'")


# -- protocols -----------------------------------------------------------------------------------
class TransferOptionsError(UserError, ValueError):
    """A transfer option (protocol, setting, fold count...) is unknown or inconsistent."""


class SklearnProtocol:
    """scikit-learn logistic regression with SentEval's usepytorch=False grids (module docstring)."""

    name = "sklearn"
    keep_empty = False  # empty lines dropped
    senteval_order = False  # folds on the file order

    def __init__(self, seed: int = 0, kfold: int = 10, inner_kfold: int | None = None):
        self.seed, self.kfold = seed, kfold
        self.inner_kfold = kfold if inner_kfold is None else inner_kfold

    def cv(self, X, y, n_classes: int) -> dict:
        return run_inner_kfold(X, y, self.kfold, self.inner_kfold, self.seed)

    def split(self, X, y, n_classes: int) -> dict:
        return run_split(X, y, self.seed)

    def kfold_test(self, X_train, y_train, X_test, y_test, n_classes: int, f1: bool = False) -> dict:
        return run_kfold_test(X_train, y_train, X_test, y_test, self.kfold, self.seed, f1)

    def settings(self) -> dict:
        return {
            "seed": self.seed,
            "kfold": self.kfold,
            "inner_kfold": self.inner_kfold,
            "c_grid_cv_and_split": list(C_GRID_SPLIT),
            "c_grid_kfold": list(C_GRID_KFOLD),
            "solver": "lbfgs",
        }

    def describe(self) -> str:
        inner = f"C by inner {self.inner_kfold}-fold CV" if self.inner_kfold else "C = 1 (no inner search)"
        return (
            f"{self.kfold}-fold CV ({inner}); C from {{2^-2..2^3}} (CV tasks, SST-2, SICK-E) or {{2^-1..2^5}} "
            f"(TREC, MRPC); lbfgs; fold seed {self.seed}; empty lines dropped."
        )


class SentEvalProtocol:
    """SentEval's PyTorch logistic regression (``evaluation.senteval_classifier``)."""

    name = "senteval"
    keep_empty = True  # SentEval embeds empty lines as empty sentences
    senteval_order = True  # its folds are drawn on its sorted order

    def __init__(
        self,
        seed: int = senteval_classifier.DEFAULT_SEED,
        setting: str = "default",
        classifier: dict | None = None,
        n_jobs: int = 1,
    ):
        self.seed, self.setting, self.n_jobs = seed, setting, n_jobs
        self.probe = senteval_classifier.probe_settings(setting, classifier)

    def _common(self, out: dict, validation: str) -> dict:
        out.pop("pred", None)
        return {**out, "protocol": validation}

    def cv(self, X, y, n_classes: int) -> dict:
        X = np.asarray(X, dtype=np.float32)  # the classifier's precision; halves what the folds copy
        out = senteval_classifier.inner_kfold_eval(X, y, n_classes, self.probe, self.seed, n_jobs=self.n_jobs)
        k = self.probe.kfold
        return self._common(out, f"{k}-fold CV, weight decay by inner {k}-fold CV, 5% held out for early stopping")

    def split(self, X, y, n_classes: int) -> dict:
        X = {name: np.asarray(part, dtype=np.float32) for name, part in X.items()}
        out = senteval_classifier.split_eval(X, y, n_classes, self.probe, self.seed, n_jobs=self.n_jobs)
        return self._common(out, "train/dev/test, weight decay by dev, dev early-stops")

    def kfold_test(self, X_train, y_train, X_test, y_test, n_classes: int, f1: bool = False) -> dict:
        X_train, X_test = np.asarray(X_train, dtype=np.float32), np.asarray(X_test, dtype=np.float32)
        out = senteval_classifier.kfold_test_eval(
            X_train, y_train, X_test, y_test, n_classes, self.probe, self.seed, n_jobs=self.n_jobs
        )
        if f1:
            out["f1"] = round(100.0 * float(f1_score(y_test, out["pred"])), 2)
        k = self.probe.kfold
        return self._common(out, f"train/test, weight decay by {k}-fold CV on train, 5% held out for early stopping")

    def settings(self) -> dict:
        return {
            "seed": self.seed,
            "fold_seed_cv_tasks": senteval_classifier.FOLD_SEED,
            "setting": self.setting,
            "classifier": self.probe.as_dict(),
            "kfold": self.probe.kfold,
            "inner_kfold": self.probe.kfold,
            "l2_grid": list(senteval_classifier.L2_GRID),
            "validation_split": senteval_classifier.VALIDATION_SPLIT,
            "jobs": self.n_jobs,
        }

    def describe(self) -> str:
        p = self.probe
        model = "logistic regression" if p.nhid == 0 else f"MLP with {p.nhid} hidden units"
        return (
            f"setting `{self.setting}`: {model}, {p.kfold}-fold, optim {p.optim}, batch {p.batch_size}, "
            f"epoch_size {p.epoch_size}, tenacity {p.tenacity}, max_epoch {p.max_epoch}; weight decay from "
            f"{{1e-5, 1e-4, 1e-3, 1e-2}}; seed {self.seed}, CV-task folds seed {senteval_classifier.FOLD_SEED}; "
            "rows in SentEval's order; empty lines kept."
        )


def make_protocol(
    protocol: str = "senteval",
    seed: int | None = None,
    kfold: int | None = None,
    inner_kfold: int | None = None,
    setting: str = "default",
    classifier: dict | None = None,
    jobs: int = 1,
):
    """The protocol object for ``evaluate_transfer``'s options (``senteval`` or ``sklearn``)."""
    if protocol not in PROTOCOLS:
        raise TransferOptionsError(f"unknown transfer protocol '{protocol}'; choose from {PROTOCOLS}.")
    if not isinstance(jobs, int) or jobs == 0 or jobs < -1:
        raise TransferOptionsError(f"jobs={jobs!r}: expected a positive number of processes or -1 (all cores).")
    if protocol == "sklearn":
        if classifier or setting != "default":
            raise TransferOptionsError(
                "the sklearn protocol has no classifier settings; 'setting' and 'classifier' are for protocol=senteval."
            )
        return SklearnProtocol(0 if seed is None else seed, 10 if kfold is None else kfold, inner_kfold)
    if protocol == "senteval":
        if inner_kfold is not None and inner_kfold != (kfold or senteval_classifier.probe_settings(setting).kfold):
            raise TransferOptionsError(
                f"inner_kfold={inner_kfold}: SentEval's inner k-fold uses the same k as the outer one; "
                "leave inner_kfold unset (or use protocol=sklearn)."
            )
        overrides = {**(classifier or {}), **({"kfold": kfold} if kfold is not None else {})}
        return SentEvalProtocol(senteval_classifier.DEFAULT_SEED if seed is None else seed, setting, overrides, jobs)
    raise TransferOptionsError("protocol=senteval-toolkit runs through evaluation.senteval_toolkit, not make_protocol.")


def _check_max_train(max_train) -> None:
    if max_train is not None and (not isinstance(max_train, int) or max_train < 10):
        raise TransferOptionsError(f"max_train={max_train!r}: expected at least 10 training examples (or none).")


def check_transfer_options(options: dict | None) -> None:
    """Validate ``evaluate_transfer`` keyword options early (e.g. in a callback's ``__init__``)."""
    options = dict(options or {})
    known = set(inspect.signature(evaluate_transfer).parameters) - {"encode", "data_dir"}
    unknown = sorted(set(options) - known)
    if unknown:
        raise TransferOptionsError(f"unknown transfer option(s) {unknown}; known: {sorted(known)}.")
    tasks = options.get("tasks")
    if tasks is not None and not set(tasks) <= set(ALL_TASKS):
        raise TransferOptionsError(f"unknown transfer task(s) {sorted(set(tasks) - set(ALL_TASKS))}; from {ALL_TASKS}.")
    _check_max_train(options.get("max_train"))
    if options.get("mrpc_features", "senteval") not in MRPC_FEATURES:
        raise TransferOptionsError(f"mrpc_features must be one of {MRPC_FEATURES}, got '{options['mrpc_features']}'.")
    protocol = options.get("protocol", "senteval")
    if protocol == "senteval-toolkit":
        from evaluation.senteval_toolkit import check_toolkit_options

        check_toolkit_options(options)
        return
    keys = ("seed", "kfold", "inner_kfold", "setting", "classifier", "jobs")
    make_protocol(protocol, **{k: options[k] for k in keys if k in options})


# -- driver --------------------------------------------------------------------------------------
def _subsample(split: Split, max_train: int | None, seed: int) -> Split:
    if max_train is None or len(split) <= max_train:
        return split
    idx, _ = train_test_split(np.arange(len(split)), train_size=max_train, stratify=split.labels, random_state=seed)
    return split.subset(np.sort(idx))


def _embed(encode: Encode, texts: list[str]) -> np.ndarray:
    emb = np.asarray(encode(list(texts)), dtype=np.float64)
    if emb.ndim != 2 or emb.shape[0] != len(texts):
        raise ValueError(f"encode returned shape {emb.shape} for {len(texts)} texts; expected [n, d].")
    return emb


def evaluate_task(
    task: str,
    encode: Encode,
    folder: Path,
    protocol: SklearnProtocol | SentEvalProtocol,
    max_train: int | None = None,
    mrpc_features: str = "senteval",
) -> dict:
    """One task under ``protocol``; ``max_train`` subsamples the training data (seed: the protocol's)."""

    def prepare(split: Split, subsample: bool) -> Split:
        if subsample:
            split = _subsample(split, max_train, protocol.seed)
        return senteval_order(split) if protocol.senteval_order else split

    if task in CV_TASKS:
        data = read_binary(folder, task, keep_empty=protocol.keep_empty)
        full = len(data)
        data = prepare(data, subsample=True)
        out = protocol.cv(_embed(encode, data.texts), data.labels, 2)
        return {**out, "n": len(data), "n_full": full}
    splits = {"SST2": read_sst2, "TREC": read_trec, "MRPC": read_mrpc, "SICKE": read_sick_entailment}.get(task)
    if splits is None:
        raise ValueError(f"unknown transfer task '{task}'; choose from {ALL_TASKS}")
    splits = splits(folder)
    full = len(splits["train"])
    splits = {name: prepare(split, subsample=name == "train") for name, split in splits.items()}
    if task in PAIR_TASKS:
        X = {
            name: pair_features(_embed(encode, s.texts), _embed(encode, s.texts_b), mrpc_features)
            for name, s in splits.items()
        }
    else:
        X = {name: _embed(encode, s.texts) for name, s in splits.items()}
    y = {name: s.labels for name, s in splits.items()}
    sizes = {"n_train": len(splits["train"]), "n_train_full": full, "n_test": len(splits["test"])}
    if task in ("SST2", "SICKE"):
        out = protocol.split(X, y, 2 if task == "SST2" else len(SICK_LABELS))
        sizes["n_dev"] = len(splits["dev"])
    else:
        n_classes = len(TREC_CLASSES) if task == "TREC" else 2
        out = protocol.kfold_test(X["train"], y["train"], X["test"], y["test"], n_classes, f1=task == "MRPC")
    if task in PAIR_TASKS:
        out["features"] = mrpc_features
    return {**out, **sizes}


def evaluate_transfer(
    encode: Encode,
    data_dir: str | Path,
    tasks: Sequence[str] = TASKS,
    seed: int | None = None,
    max_train: int | None = None,
    kfold: int | None = None,
    inner_kfold: int | None = None,
    mrpc_features: str = "senteval",
    protocol: str = "senteval",
    setting: str = "default",
    classifier: dict | None = None,
    jobs: int = 1,
    toolkit_classifier: str | None = None,
    batch_size: int = 128,
) -> dict:
    """Run the transfer tasks with ``encode`` (list of texts -> [n, d] array) under ``protocol``.

    ``data_dir`` is SentEval's ``data/downstream`` folder. A task whose folder is absent is
    skipped with a warning and reported as ``{"skipped": reason}``. Accuracies are in %.

    - ``protocol="senteval"``: ``setting`` ``default``/``prototyping``, ``classifier`` overrides
      of its keys (e.g. ``{"optim": "adam", "max_epoch": 50}``), ``kfold`` overrides the
      setting's k; ``seed`` defaults to SentEval's 1111; ``jobs`` processes share the folds
      (the numbers do not depend on it).
    - ``protocol="sklearn"``: ``kfold`` default 10, ``inner_kfold`` default ``kfold`` (0: C = 1),
      ``seed`` default 0.
    - ``protocol="senteval-toolkit"``: ``evaluation.senteval_toolkit.run_toolkit`` (``setting``,
      ``seed``, ``kfold``, ``classifier``, ``toolkit_classifier``, ``batch_size``).
    """
    data_dir = Path(data_dir)
    unknown = [t for t in tasks if t not in ALL_TASKS]
    if unknown:
        raise TransferOptionsError(f"unknown transfer task(s) {unknown}; choose from {ALL_TASKS}")
    if mrpc_features not in MRPC_FEATURES:
        raise TransferOptionsError(f"mrpc_features must be one of {MRPC_FEATURES}, got '{mrpc_features}'")
    _check_max_train(max_train)
    if protocol == "senteval-toolkit":
        from evaluation.senteval_toolkit import run_toolkit

        if max_train is not None or inner_kfold is not None or mrpc_features != "senteval":
            raise TransferOptionsError(
                "protocol=senteval-toolkit reads and splits the data itself: max_train, inner_kfold and "
                "mrpc_features cannot be applied to it."
            )
        return run_toolkit(encode, data_dir, tasks, setting, seed, kfold, classifier, toolkit_classifier, batch_size)
    if toolkit_classifier is not None:
        raise TransferOptionsError("toolkit_classifier is an option of protocol=senteval-toolkit only.")
    proto = make_protocol(protocol, seed, kfold, inner_kfold, setting, classifier, jobs)
    results: dict[str, dict] = {}
    for task in tasks:
        folder = data_dir / TASK_FOLDERS[task]
        if not folder.is_dir():
            reason = f"folder '{folder}' not found"
            warnings.warn(f"transfer task {task} skipped: {reason}", stacklevel=2)
            results[task] = {"skipped": reason}
            continue
        start = time.perf_counter()
        with warnings.catch_warnings(record=True) as caught:
            # counted, not printed: a 10x10 CV would print hundreds of identical lines
            warnings.simplefilter("always", ConvergenceWarning)
            results[task] = evaluate_task(task, encode, folder, proto, max_train, mrpc_features)
        for w in caught:
            if not issubclass(w.category, ConvergenceWarning):
                warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
        unconverged = sum(issubclass(w.category, ConvergenceWarning) for w in caught)
        if unconverged:
            results[task]["unconverged_fits"] = unconverged
            log.warning("%s: %d logistic-regression fits hit max_iter", task, unconverged)
        results[task]["seconds"] = round(time.perf_counter() - start, 1)
        log.info("%s: acc %.2f (%.1f s, protocol %s)", task, results[task]["acc"], results[task]["seconds"], protocol)
    return summarise(results, tasks, protocol, proto.describe(), proto.settings(), max_train, mrpc_features, data_dir)


def protocol_heading(result: dict) -> str:
    """One line naming the protocol of a transfer result (older results: scikit-learn)."""
    protocol = result.get("protocol", "sklearn")
    description = result.get("protocol_description", "")
    return f"Protocol: **{protocol}**, {PROTOCOL_NAMES[protocol]}." + (f" {description}" if description else "")


def _regulariser(r: dict) -> str:
    for key, name in (("l2", "L2"), ("C", "C")):
        if key in r and r[key] is not None:
            values = r[key] if isinstance(r[key], list) else [r[key]]
            return f"{name} " + "/".join(f"{v:g}" for v in sorted(set(values)))
    return ""


def to_markdown(result: dict, title: str = "SentEval transfer") -> str:
    s = result["settings"]
    subsampled = f"training sets subsampled to at most {s['max_train']} (not comparable to published numbers)"
    lines = [
        f"# {title}",
        "",
        protocol_heading(result),
        "",
        f"Data: {subsampled if s.get('max_train') else 'full training sets'}; MRPC/SICK-E features "
        f"{s.get('mrpc_features', 'senteval')}.",
        "",
        "| task | acc | F1 | dev acc | regulariser | train | test | validation | seconds |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for task, r in result["tasks"].items():
        if "skipped" in r:
            lines.append(f"| {task} | skipped: {r['skipped']} | | | | | | | |")
            continue
        train = r.get("n_train", r.get("n"))
        full = r.get("n_train_full", r.get("n_full"))
        train_txt = f"{train}" + (f" of {full}" if full is not None and full != train else "")
        test_txt = r.get("n_test", "CV")
        f1 = f"{r['f1']:.2f}" if "f1" in r else ""
        dev = "" if r.get("devacc") is None else f"{r['devacc']:.2f}"
        lines.append(
            f"| {task} | {r['acc']:.2f} | {f1} | {dev} | {_regulariser(r)} | {train_txt} | {test_txt} | "
            f"{r['protocol']} | {r.get('seconds', '')} |"
        )
    if result["avg"] is not None:
        protocol = result.get("protocol", "sklearn")
        lines += ["", f"Average accuracy over {', '.join(result['avg_over'])}: {result['avg']:.2f} ({protocol})"]
    return "\n".join(lines) + "\n"


@exit_on_user_error
def main(argv: Sequence[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(
        prog="python -m evaluation.transfer",
        description="SentEval transfer tasks on frozen embeddings under a named protocol (default: SentEval's "
        "PyTorch logistic regression, as the papers report).",
    )
    parser.add_argument("--model", required=True, help="run folder, .ckpt, exported or Hugging Face model folder, "
                        "Hub name, minilm or tiny (evaluation.load)")
    parser.add_argument("--pooling", default=None, choices=("mean", "cls", "cls_before_pooler"),
                        help="default: the model's own (a run's eval pooling, an exported folder's, else mean)")
    parser.add_argument(
        "--data-dir", default="../shared/data/senteval/downstream", help="SentEval data/downstream folder"
    )
    parser.add_argument("--out", default="outputs/transfer", help="folder for transfer.md and transfer.json")
    parser.add_argument("--tasks", nargs="+", default=list(TASKS), choices=ALL_TASKS)
    parser.add_argument(
        "--protocol",
        default="senteval",
        choices=PROTOCOLS,
        help="senteval: SentEval's PyTorch logistic regression (our code, the papers' protocol); sklearn: "
        "scikit-learn logistic regression; senteval-toolkit: the installed SentEval package",
    )
    parser.add_argument(
        "--setting",
        default="default",
        choices=sorted(senteval_classifier.SETTINGS),
        help="SentEval classifier setting (senteval, senteval-toolkit)",
    )
    parser.add_argument("--max-train", type=int, default=None, help="subsample training sets (CV pools) to this size")
    parser.add_argument(
        "--max-length", type=int, default=128, help="token limit when embedding (SentEval does not truncate)"
    )
    parser.add_argument("--batch-size", type=int, default=128)
    parser.add_argument("--seed", type=int, default=None, help="default: 1111 (senteval, toolkit), 0 (sklearn)")
    parser.add_argument("--kfold", type=int, default=None, help="default: the setting's (senteval), 10 (sklearn)")
    parser.add_argument(
        "--inner-kfold", type=int, default=None, help="sklearn only; default: same as --kfold; 0 = C fixed to 1"
    )
    parser.add_argument("--mrpc-features", default="senteval", choices=MRPC_FEATURES)
    parser.add_argument(
        "--jobs", type=int, default=1, help="processes for the senteval protocol's folds (results do not change)"
    )
    parser.add_argument(
        "--toolkit-classifier",
        default=None,
        choices=("pytorch", "sklearn"),
        help="senteval-toolkit: SentEval's usepytorch (default: pytorch when CUDA is available; its PyTorch "
        "classifier needs CUDA)",
    )
    parser.add_argument("--threads", type=int, default=None, help="torch CPU threads for embedding (default: torch's)")
    args = parser.parse_args(argv)
    if args.toolkit_classifier and args.protocol != "senteval-toolkit":
        parser.error("--toolkit-classifier applies to --protocol senteval-toolkit only")
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")

    import torch

    if args.threads:
        torch.set_num_threads(args.threads)
    from evaluation.load import load_encoder

    options = dict(
        tasks=args.tasks,
        seed=args.seed,
        max_train=args.max_train,
        kfold=args.kfold,
        inner_kfold=args.inner_kfold,
        mrpc_features=args.mrpc_features,
        protocol=args.protocol,
        setting=args.setting,
        jobs=args.jobs,
        toolkit_classifier=args.toolkit_classifier,
        batch_size=args.batch_size,
    )
    if args.protocol != "senteval-toolkit":
        del options["toolkit_classifier"], options["batch_size"]
    check_transfer_options(options)  # before loading the model
    start = time.perf_counter()
    encoder, pooling = load_encoder(args.model, args.pooling)
    encoder.max_length = args.max_length
    encode = lambda texts: encoder.encode(texts, batch_size=args.batch_size, pooling=pooling).numpy()  # noqa: E731
    result = evaluate_transfer(encode, args.data_dir, **options)
    result["settings"].update(
        model=args.model, pooling=pooling, max_length=args.max_length, torch_threads=torch.get_num_threads()
    )
    result["seconds"] = round(time.perf_counter() - start, 1)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "transfer.json").write_text(json.dumps(result, indent=2))
    markdown = to_markdown(result, f"SentEval transfer: {args.model} ({pooling} pooling)")
    markdown += f"\nTotal wall time {result['seconds']} s.\n"
    (out / "transfer.md").write_text(markdown)
    print(markdown)
    return result


if __name__ == "__main__":
    import console

    console.configure()  # no "Loading weights" bars from transformers, no adverts
    main()
