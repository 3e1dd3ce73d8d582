"""SentEval's PyTorch transfer classifier and its validation schemes, on frozen features (docs/evaluation.md).

SimCSE, PairSupCon and ClusterNS report the SentEval transfer tasks with SentEval's *PyTorch*
classifier (``usepytorch=True``), not with its scikit-learn path. This module is our own
implementation of that protocol, written from its description (SentEval ``tools/classifier.py``
and ``tools/validation.py``); ``evaluation.benchmarks.transfer`` feeds it the task features.

Classifier (``LinearProbe``; ``nhid = 0`` gives SentEval's logistic regression): one linear layer
on the frozen features (``nhid > 0``: linear, dropout, sigmoid, linear), softmax cross-entropy
averaged over the minibatch (what ``nn.CrossEntropyLoss`` computes on PyTorch >= 1.0, where
SentEval's later ``size_average = False`` assignment has no effect), minibatches in a fresh random
order every pass, and the optimiser's own (coupled) weight decay on every parameter, bias
included, as the L2 regulariser. Training runs in rounds of ``epoch_size`` passes while fewer
than ``max_epoch`` + 1 passes are done; after each round the accuracy on a held-out set is
measured and the best model so far is kept; training stops at the (``tenacity`` + 1)-th round
that does not beat the best (SentEval counts these rounds over the whole run: an improvement does
not reset the count). The kept model is the result.

Randomness, as SentEval: a classifier is seeded with ``seed`` when it is made. NumPy's Mersenne
Twister with that seed draws the 5 % held-out split and the order of every pass; torch's CPU
generator with that seed draws the initial weights (and dropout masks). So the same seed and data
give the same classifier, and every classifier of a protocol starts from the same seed. The global
NumPy and torch generators are left untouched.

Validation schemes:

- ``Schemes.inner_kfold`` (MR, CR, SUBJ, MPQA; SentEval ``InnerKFoldClassifier``): outer stratified
  k-fold; in each outer fold the weight decay comes from ``L2_GRID`` by an inner stratified k-fold
  on the outer training part, where each inner classifier early-stops on its inner held-out fold
  and is scored on it; the score of a decay is the mean of those accuracies in %, rounded to two
  decimals, and the first best wins. The chosen decay is refit on the whole outer training part
  with 5 % of it held out at random for early stopping and scored on the outer test fold. Both
  k-folds are ``StratifiedKFold(shuffle=True, random_state=1111)`` whatever ``seed`` is (SentEval
  fixes them), applied to the examples in SentEval's order (``evaluation.benchmarks.transfer`` sorts them).
- ``Schemes.kfold_test`` (TREC, MRPC; ``KFoldClassifier``): decay by stratified k-fold CV on train
  (``random_state=seed``) scored as above, refit on all of train with 5 % held out, test accuracy.
- ``Schemes.split`` (SST-2, SICK-E; ``SplitClassifier``): one classifier per decay trained on train,
  early-stopping on dev; best dev accuracy picks the decay; test accuracy of that classifier
  (SentEval trains it a second time with the same seed, which gives the same classifier).

Accuracies are in %, rounded to two decimals where SentEval rounds them (per fold and the mean).
``SETTINGS`` holds SentEval's two documented classifier configurations.
"""

from __future__ import annotations

import contextlib
import inspect
from dataclasses import asdict, dataclass, replace
from typing import Mapping

import numpy as np
import torch
import torch.nn.functional as F
from sklearn.model_selection import StratifiedKFold
from torch import nn

from textcore.errors import UserError

FOLD_SEED = 1111  # InnerKFoldClassifier's fixed fold seed
DEFAULT_SEED = 1111  # SentEval's params.seed
L2_GRID = tuple(10.0**t for t in range(-5, -1))  # 1e-5, 1e-4, 1e-3, 1e-2: SentEval's weight-decay grid
VALIDATION_SPLIT = 0.05  # held-out share for the final fits of the k-fold schemes

# optimisers SentEval's "name,key=value" strings can name; Rprop is left out: it has no weight decay
OPTIMIZERS = {
    "adadelta": torch.optim.Adadelta,
    "adagrad": torch.optim.Adagrad,
    "adam": torch.optim.Adam,
    "adamax": torch.optim.Adamax,
    "asgd": torch.optim.ASGD,
    "rmsprop": torch.optim.RMSprop,
    "sgd": torch.optim.SGD,
}


class ProbeSettingsError(UserError, ValueError):
    """A classifier setting is unknown or out of range; the message names the key."""


def parse_optimizer(spec: str) -> tuple[type, dict[str, float]]:
    """``"adam"``, ``"sgd,lr=0.1"``, ``"rmsprop,lr=0.001,alpha=0.9"`` -> (optimizer class, kwargs)."""
    name, *pairs = [part.strip() for part in str(spec).split(",")]
    if name not in OPTIMIZERS:
        raise ProbeSettingsError(f"optim '{spec}': unknown optimiser '{name}'; choose from {sorted(OPTIMIZERS)}.")
    cls = OPTIMIZERS[name]
    allowed = set(inspect.signature(cls.__init__).parameters) - {"self", "params", "weight_decay"}
    kwargs: dict[str, float] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        try:
            number = float(value)
        except ValueError:
            number = None
        if not sep or number is None:
            raise ProbeSettingsError(f"optim '{spec}': '{pair}' is not key=number.")
        if key not in allowed:
            raise ProbeSettingsError(f"optim '{spec}': {name} takes no '{key}'; it takes {sorted(allowed)}.")
        kwargs[key] = number
    if name == "sgd" and "lr" not in kwargs:
        raise ProbeSettingsError(f"optim '{spec}': sgd needs a learning rate, e.g. 'sgd,lr=0.1'.")
    return cls, kwargs


@dataclass(frozen=True)
class ProbeSettings:
    """SentEval's ``params.kfold`` and ``params.classifier`` (defaults: its ``MLP`` defaults)."""

    kfold: int = 10
    optim: str = "adam"
    batch_size: int = 64
    tenacity: int = 5
    epoch_size: int = 4
    max_epoch: int = 200
    nhid: int = 0
    dropout: float = 0.0

    def __post_init__(self):
        for key, low in (("kfold", 2), ("batch_size", 1), ("tenacity", 0), ("epoch_size", 1), ("max_epoch", 0)):
            value = getattr(self, key)
            if not isinstance(value, int) or isinstance(value, bool) or value < low:
                raise ProbeSettingsError(f"classifier setting {key}={value!r}: expected an integer >= {low}.")
        if not isinstance(self.nhid, int) or self.nhid < 0:
            raise ProbeSettingsError(f"classifier setting nhid={self.nhid!r}: expected 0 (logistic regression) or more")
        if not 0.0 <= float(self.dropout) < 1.0:
            raise ProbeSettingsError(f"classifier setting dropout={self.dropout!r}: expected a value in [0, 1).")
        parse_optimizer(self.optim)

    def as_dict(self) -> dict:
        return asdict(self)


# SentEval's README: "prototyping" (quick) and "default" (the papers' numbers) configurations
SETTINGS = {
    "default": ProbeSettings(kfold=10, optim="adam", batch_size=64, tenacity=5, epoch_size=4),
    "prototyping": ProbeSettings(kfold=5, optim="rmsprop", batch_size=128, tenacity=3, epoch_size=2),
}


def probe_settings(setting: str | ProbeSettings = "default", overrides: Mapping | None = None) -> ProbeSettings:
    """A named setting (or given settings) with ``overrides`` (e.g. ``{"kfold": 5}``) applied."""
    if isinstance(setting, ProbeSettings):
        base = setting
    elif setting in SETTINGS:
        base = SETTINGS[setting]
    else:
        raise ProbeSettingsError(f"unknown SentEval classifier setting '{setting}'; choose from {sorted(SETTINGS)}.")
    overrides = {k: v for k, v in dict(overrides or {}).items() if v is not None}
    unknown = sorted(set(overrides) - set(base.as_dict()))
    if unknown:
        raise ProbeSettingsError(f"unknown classifier setting(s) {unknown}; known: {sorted(base.as_dict())}.")
    return replace(base, **overrides)


class EarlyStopping:
    """SentEval's rule: keep the best held-out accuracy; stop at the (tenacity + 1)-th round that
    does not beat it, counting such rounds over the whole run."""

    def __init__(self, tenacity: int):
        self.tenacity = tenacity
        self.best = -1.0
        self.misses = 0

    def update(self, accuracy: float) -> tuple[bool, bool]:
        """Returns (improved, stop)."""
        if accuracy > self.best:
            self.best = accuracy
            return True, False
        stop = self.misses >= self.tenacity
        self.misses += 1
        return False, stop


def build_model(in_dim: int, n_classes: int, nhid: int = 0, dropout: float = 0.0) -> nn.Sequential:
    if nhid == 0:
        return nn.Sequential(nn.Linear(in_dim, n_classes))
    return nn.Sequential(nn.Linear(in_dim, nhid), nn.Dropout(dropout), nn.Sigmoid(), nn.Linear(nhid, n_classes))


def _features(X) -> torch.Tensor:
    return torch.as_tensor(np.asarray(X, dtype=np.float32))


def _labels(y) -> torch.Tensor:
    return torch.as_tensor(np.asarray(y, dtype=np.int64))


@contextlib.contextmanager
def torch_threads(n: int):
    """Minibatches of 64 x d are far too small to share between threads; restore the count after."""
    saved = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(saved)


class LinearProbe:
    """SentEval's PyTorch classifier (logistic regression for ``nhid = 0``) with weight decay ``l2``.

    ``fit`` takes either held-out data for early stopping or ``validation_split`` (a share of the
    training rows held out at random); it returns the best held-out accuracy (a fraction).
    """

    def __init__(
        self,
        in_dim: int,
        n_classes: int,
        l2: float,
        settings: ProbeSettings = SETTINGS["default"],
        seed: int = DEFAULT_SEED,
    ):
        self.settings = settings
        self.l2 = float(l2)
        self._rng = np.random.RandomState(seed)  # = np.random.seed(seed) of SentEval, without the global state
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            self.model = build_model(in_dim, n_classes, settings.nhid, settings.dropout)
            self._torch_state = torch.get_rng_state()  # dropout continues this stream in fit
        cls, kwargs = parse_optimizer(settings.optim)
        self.optimizer = cls(self.model.parameters(), weight_decay=self.l2, **kwargs)
        self.validation_rows: np.ndarray | None = None  # rows held out by validation_split in the last fit
        self.passes = 0  # passes over the training rows in the last fit
        self.rounds = 0  # held-out evaluations in the last fit

    def fit(self, X, y, X_val=None, y_val=None, validation_split: float | None = None) -> float:
        if (X_val is None) == (validation_split is None):
            raise ValueError("LinearProbe.fit needs exactly one of X_val/y_val and validation_split.")
        X, y = np.asarray(X), np.asarray(y)
        self.validation_rows = None
        if X_val is None:
            order = self._rng.permutation(len(X))
            n_val = max(1, int(validation_split * len(X)))  # SentEval divides by zero when this is 0
            X, y, X_val, y_val = X[order[n_val:]], y[order[n_val:]], X[order[:n_val]], y[order[:n_val]]
            self.validation_rows = order[:n_val]
        Xt, yt, Xv, yv = _features(X), _labels(y), _features(X_val), _labels(y_val)  # [n, d] [n] [m, d] [m]
        stopper, best_state = EarlyStopping(self.settings.tenacity), None
        self.passes = self.rounds = 0
        with torch.random.fork_rng(devices=[]), torch_threads(1):
            torch.set_rng_state(self._torch_state)
            while self.passes <= self.settings.max_epoch:
                for _ in range(self.settings.epoch_size):
                    self._one_pass(Xt, yt)
                self.passes += self.settings.epoch_size
                self.rounds += 1
                improved, stop = stopper.update(self._accuracy(Xv, yv))
                if improved:
                    best_state = {k: v.detach().clone() for k, v in self.model.state_dict().items()}
                if stop:
                    break
            self._torch_state = torch.get_rng_state()
        self.model.load_state_dict(best_state)
        return stopper.best

    def _one_pass(self, X: torch.Tensor, y: torch.Tensor) -> None:
        self.model.train()
        order = torch.from_numpy(self._rng.permutation(len(X)))  # [n]
        for start in range(0, len(X), self.settings.batch_size):
            idx = order[start : start + self.settings.batch_size]  # [b]
            loss = F.cross_entropy(self.model(X[idx]), y[idx])  # mean over the batch
            self.optimizer.zero_grad()
            loss.backward()
            self.optimizer.step()

    @torch.no_grad()
    def _accuracy(self, X: torch.Tensor, y: torch.Tensor) -> float:
        self.model.eval()
        return (self.model(X).argmax(dim=1) == y).sum().item() / len(y)

    @torch.no_grad()
    def predict(self, X) -> np.ndarray:
        self.model.eval()
        return self.model(_features(X)).argmax(dim=1).numpy()

    def score(self, X, y) -> float:
        return self._accuracy(_features(X), _labels(y))


def stratified_folds(y: np.ndarray, k: int, seed: int) -> list[tuple[np.ndarray, np.ndarray]]:
    """SentEval's folds: ``StratifiedKFold(k, shuffle=True, random_state=seed)`` on the rows in order
    (with the installed scikit-learn, as SentEval run today; the shuffling changed in scikit-learn 0.22)."""
    skf = StratifiedKFold(n_splits=k, shuffle=True, random_state=seed)
    return list(skf.split(np.zeros((len(y), 1)), y))


def _pct(fraction: float) -> float:
    return round(100.0 * float(fraction), 2)


def _in_parallel(fn, calls: list[tuple], n_jobs: int) -> list:
    """``[fn(*args) for args in calls]``, over ``n_jobs`` processes when > 1. Every classifier is
    seeded on its own, so the results do not depend on ``n_jobs``."""
    if n_jobs == 1 or len(calls) <= 1:
        with torch_threads(1):
            return [fn(*args) for args in calls]
    from joblib import Parallel, delayed

    return Parallel(n_jobs=n_jobs)(delayed(_single_threaded)(fn, *args) for args in calls)


def _single_threaded(fn, *args):
    with torch_threads(1):
        return fn(*args)


def _fold_accuracy(X, y, train, held, n_classes, l2, settings, seed) -> float:
    """Best held-out accuracy of a classifier trained on rows ``train`` that early-stops on ``held``."""
    return LinearProbe(X.shape[1], n_classes, l2, settings, seed).fit(X[train], y[train], X[held], y[held])


def grid_scores(X, y, n_classes, folds, grid, settings, seed, n_jobs: int = 1) -> list[float]:
    """Per decay: mean accuracy (%, 2 decimals) over ``folds``, each held-out fold doubling as the
    early-stopping set of the classifier scored on it (SentEval's cross-validation)."""
    calls = [(X, y, train, held, n_classes, l2, settings, seed) for l2 in grid for train, held in folds]
    accuracies = np.asarray(_in_parallel(_fold_accuracy, calls, n_jobs)).reshape(len(grid), len(folds))
    return [_pct(row.mean()) for row in accuracies]


def _refit(X_train, y_train, n_classes, l2, settings, seed) -> LinearProbe:
    """The chosen decay's classifier on all the training rows, ``VALIDATION_SPLIT`` of them held out at random
    for early stopping (the k-fold schemes' final fit)."""
    probe = LinearProbe(X_train.shape[1], n_classes, l2, settings, seed)
    probe.fit(X_train, y_train, validation_split=VALIDATION_SPLIT)
    return probe


def _outer_fold(X, y, train, held, n_classes, settings, seed, grid) -> tuple[float, float, float]:
    """One outer fold of ``Schemes.inner_kfold``: (test accuracy %, best inner CV score, chosen decay)."""
    X_train, y_train = X[train], y[train]
    inner = stratified_folds(y_train, settings.kfold, FOLD_SEED)
    scores = grid_scores(X_train, y_train, n_classes, inner, grid, settings, seed)
    best = int(np.argmax(scores))  # first best: the weakest decay among ties
    probe = _refit(X_train, y_train, n_classes, grid[best], settings, seed)
    return _pct(probe.score(X[held], y[held])), scores[best], grid[best]


def _test_result(scores: list[float], grid, best: int, pred: np.ndarray, y_test) -> dict:
    """A scheme with a test set: the decay ``grid[best]`` chosen on ``scores`` (one per decay), the test accuracy
    of its classifier's predictions ``pred`` [n_test]."""
    return {
        "acc": _pct(np.mean(pred == np.asarray(y_test))),
        "devacc": scores[best],
        "l2": grid[best],
        "l2_scores": dict(zip(map(float, grid), scores)),
        "pred": pred,
    }


def _split_fit(X, y, n_classes, l2, settings, seed) -> tuple[float, np.ndarray]:
    probe = LinearProbe(X["train"].shape[1], n_classes, l2, settings, seed)
    dev = _pct(probe.fit(X["train"], y["train"], X["dev"], y["dev"]))
    return dev, probe.predict(X["test"])


@dataclass(frozen=True)
class Schemes:
    """SentEval's three validation schemes (the module's docstring) with one classifier ``settings``, ``seed`` and
    weight-decay ``grid``; ``n_jobs``: processes for the folds or decays (1: none; the results do not depend on
    it)."""

    settings: ProbeSettings = SETTINGS["default"]
    seed: int = DEFAULT_SEED
    grid: tuple[float, ...] = L2_GRID
    n_jobs: int = 1

    def inner_kfold(self, X: np.ndarray, y: np.ndarray, n_classes: int) -> dict:
        """MR/CR/SUBJ/MPQA: outer k-fold test accuracy, weight decay by inner k-fold per outer fold (the outer folds
        in ``n_jobs`` processes)."""
        outer = stratified_folds(y, self.settings.kfold, FOLD_SEED)
        calls = [(X, y, train, held, n_classes, self.settings, self.seed, self.grid) for train, held in outer]
        test, dev, chosen = zip(*_in_parallel(_outer_fold, calls, self.n_jobs))
        return {
            "acc": round(float(np.mean(test)), 2),
            "acc_std": round(float(np.std(test)), 2),
            "devacc": round(float(np.mean(dev)), 2),
            "fold_acc": list(test),
            "l2": list(chosen),
        }

    def kfold_test(self, X_train: np.ndarray, y_train: np.ndarray, X_test: np.ndarray, y_test: np.ndarray,
                   n_classes: int) -> dict:
        """TREC/MRPC: decay by k-fold CV on train, refit on train (5 % held out), test accuracy; ``pred``
        [n_test]."""
        folds = stratified_folds(y_train, self.settings.kfold, self.seed)
        scores = grid_scores(X_train, y_train, n_classes, folds, self.grid, self.settings, self.seed, self.n_jobs)
        best = int(np.argmax(scores))
        with torch_threads(1):
            pred = _refit(X_train, y_train, n_classes, self.grid[best], self.settings, self.seed).predict(X_test)
        return _test_result(scores, self.grid, best, pred, y_test)

    def split(self, X: Mapping[str, np.ndarray], y: Mapping[str, np.ndarray], n_classes: int) -> dict:
        """SST-2/SICK-E: decay by dev accuracy (dev also early-stops), test accuracy of that classifier."""
        calls = [(X, y, n_classes, l2, self.settings, self.seed) for l2 in self.grid]
        results = _in_parallel(_split_fit, calls, self.n_jobs)
        scores = [dev for dev, _ in results]
        best = int(np.argmax(scores))
        return _test_result(scores, self.grid, best, results[best][1], y["test"])
