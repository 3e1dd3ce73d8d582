"""The classifiers and protocols that score frozen embeddings on a SentEval transfer task
(``evaluation.benchmarks.transfer`` runs them over the tasks).

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
"""
from __future__ import annotations

import functools
import logging
from typing import Sequence

import numpy as np
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import f1_score
from sklearn.model_selection import StratifiedKFold
from threadpoolctl import threadpool_limits

from evaluation.benchmarks.senteval import classifier as senteval_classifier
from evaluation.benchmarks.senteval.tasks import MRPC_FEATURES, PROTOCOLS, TransferOptionsError

C_GRID_SPLIT = tuple(2.0**t for t in range(-2, 4))  # SentEval InnerKFold / Split classifiers
C_GRID_KFOLD = tuple(2.0**t for t in range(-1, 6))  # SentEval KFoldClassifier (TREC, MRPC)

log = logging.getLogger(__name__)


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
    """SentEval's PyTorch logistic regression (``evaluation.benchmarks.senteval.classifier``)."""

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
        self.schemes = senteval_classifier.Schemes(self.probe, seed, n_jobs=n_jobs)

    def _common(self, out: dict, validation: str) -> dict:
        out.pop("pred", None)
        return {**out, "protocol": validation}

    def cv(self, X, y, n_classes: int) -> dict:
        X = np.asarray(X, dtype=np.float32)  # the classifier's precision; halves what the folds copy
        out = self.schemes.inner_kfold(X, y, n_classes)
        k = self.probe.kfold
        return self._common(out, f"{k}-fold CV, weight decay by inner {k}-fold CV, 5% held out for early stopping")

    def split(self, X, y, n_classes: int) -> dict:
        X = {name: np.asarray(part, dtype=np.float32) for name, part in X.items()}
        out = self.schemes.split(X, y, n_classes)
        return self._common(out, "train/dev/test, weight decay by dev, dev early-stops")

    def kfold_test(self, X_train, y_train, X_test, y_test, n_classes: int, f1: bool = False) -> dict:
        X_train, X_test = np.asarray(X_train, dtype=np.float32), np.asarray(X_test, dtype=np.float32)
        out = self.schemes.kfold_test(X_train, y_train, X_test, y_test, n_classes)
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
    raise TransferOptionsError("protocol=senteval-toolkit runs through evaluation.benchmarks.senteval.toolkit, "
                               "not make_protocol.")
