"""SentEval transfer tasks on frozen sentence embeddings (SPEC §6).

Tasks and SentEval's protocols with scikit-learn logistic regression, the L2 strength C picked
from SentEval's grids:

- MR, CR, SUBJ, MPQA (one pool of labelled sentences): stratified ``kfold``-fold
  cross-validation (10 by default, as SPEC §6 asks; SentEval's own default is 5). In each outer
  fold C is chosen by an inner stratified ``inner_kfold``-fold CV on the training part over
  C in {2^-2 .. 2^3}; accuracy is the mean over the outer test folds. ``inner_kfold=0`` skips the
  inner search and uses C = 1 (faster, not SentEval).
- SST-2 (train/dev/test): fit on train for each C in {2^-2 .. 2^3}, keep the best on dev,
  report test accuracy.
- TREC (train/test, 6 coarse classes, the label before ':'): C in {2^-1 .. 2^5} chosen by
  ``kfold``-fold CV on train, refit on all of train, test accuracy on ``TREC_10.label``.
- MRPC (train/test sentence pairs): same protocol as TREC on pair features. SentEval's MRPC
  features are ``[|u-v|, u*v]`` (``mrpc_features="senteval"``, the default);
  ``mrpc_features="full"`` uses ``[u, v, |u-v|, u*v]`` (InferSent's NLI features). Accuracy and
  F1 of the paraphrase class.

Differences from SentEval, all deliberate: empty lines are dropped (CR has 4 and MPQA 3 in the
shared copy; SentEval embeds them as empty sentences, so its counts are CR 3,775 and MPQA 10,606
against our 3,771 and 10,603); the fold splits use ``seed`` (SentEval: 1111); lbfgs replaces the
liblinear solver of old scikit-learn (same optimum, both L2-regularised with the intercept).
``max_train`` (optional) draws a stratified random subsample of at most that many training
examples (for MR/CR/SUBJ/MPQA: of the whole CV pool) for quick CPU runs; it is recorded in the
output and results with it are not comparable to published numbers.

File encodings follow SentEval: Latin-1 for MR/CR/SUBJ/MPQA/TREC (TREC's train file is
Latin-1), UTF-8 for SST-2, UTF-8 with an optional BOM for MRPC (whose first line is a header).
"""

from __future__ import annotations

import argparse
import functools
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

from errors import UserError

TASKS = ("MR", "CR", "SUBJ", "MPQA", "SST2", "TREC", "MRPC")
CV_TASKS = ("MR", "CR", "SUBJ", "MPQA")
TASK_FOLDERS = {
    "MR": "MR",
    "CR": "CR",
    "SUBJ": "SUBJ",
    "MPQA": "MPQA",
    "SST2": "SST/binary",
    "TREC": "TREC",
    "MRPC": "MRPC",
}
# (file of label 1, file of label 0); SentEval labels SUBJ's objective sentences 1
BINARY_FILES = {
    "MR": ("rt-polarity.pos", "rt-polarity.neg"),
    "CR": ("custrev.pos", "custrev.neg"),
    "SUBJ": ("subj.objective", "subj.subjective"),
    "MPQA": ("mpqa.pos", "mpqa.neg"),
}
TREC_CLASSES = ("ABBR", "DESC", "ENTY", "HUM", "LOC", "NUM")
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


def read_binary(folder: Path, task: str) -> Split:
    """MR/CR/SUBJ/MPQA: one sentence per line, label from the file; empty lines dropped."""
    texts, labels = [], []
    for label, name in zip((1, 0), BINARY_FILES[task]):
        kept = [_clean(line) for line in _lines(folder / name, "latin-1")]
        kept = [t for t in kept if t]
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
    """SST-2: C by dev accuracy, test accuracy of the model trained on train with that C."""
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
    seed: int = 0,
    max_train: int | None = None,
    kfold: int = 10,
    inner_kfold: int | None = None,
    mrpc_features: str = "senteval",
) -> dict:
    inner = kfold if inner_kfold is None else inner_kfold
    if task in CV_TASKS:
        data = read_binary(folder, task)
        full = len(data)
        data = _subsample(data, max_train, seed)
        out = run_inner_kfold(_embed(encode, data.texts), data.labels, kfold, inner, seed)
        return {**out, "n": len(data), "n_full": full}
    if task == "SST2":
        splits = read_sst2(folder)
        full = len(splits["train"])
        splits["train"] = _subsample(splits["train"], max_train, seed)
        X = {k: _embed(encode, s.texts) for k, s in splits.items()}
        out = run_split(X, {k: s.labels for k, s in splits.items()}, seed)
        return {
            **out,
            "n_train": len(splits["train"]),
            "n_train_full": full,
            "n_dev": len(splits["dev"]),
            "n_test": len(splits["test"]),
        }
    if task == "TREC":
        splits = read_trec(folder)
        full = len(splits["train"])
        train = _subsample(splits["train"], max_train, seed)
        test = splits["test"]
        out = run_kfold_test(
            _embed(encode, train.texts), train.labels, _embed(encode, test.texts), test.labels, kfold, seed
        )
        return {**out, "n_train": len(train), "n_train_full": full, "n_test": len(test)}
    if task == "MRPC":
        splits = read_mrpc(folder)
        full = len(splits["train"])
        train = _subsample(splits["train"], max_train, seed)
        test = splits["test"]
        feats = {
            name: pair_features(_embed(encode, s.texts), _embed(encode, s.texts_b), mrpc_features)
            for name, s in (("train", train), ("test", test))
        }
        out = run_kfold_test(feats["train"], train.labels, feats["test"], test.labels, kfold, seed, f1=True)
        return {**out, "features": mrpc_features, "n_train": len(train), "n_train_full": full, "n_test": len(test)}
    raise ValueError(f"unknown transfer task '{task}'; choose from {TASKS}")


def evaluate_transfer(
    encode: Encode,
    data_dir: str | Path,
    tasks: Sequence[str] = TASKS,
    seed: int = 0,
    max_train: int | None = None,
    kfold: int = 10,
    inner_kfold: int | None = None,
    mrpc_features: str = "senteval",
) -> dict:
    """Run the transfer tasks with ``encode`` (list of texts -> [n, d] array).

    ``data_dir`` is SentEval's ``data/downstream`` folder. A task whose folder is absent is
    skipped with a warning and reported as ``{"skipped": reason}``. Accuracies are in %.
    ``inner_kfold=None`` uses ``kfold`` (SentEval); 0 fixes C = 1 for MR/CR/SUBJ/MPQA.
    """
    data_dir = Path(data_dir)
    unknown = [t for t in tasks if t not in TASKS]
    if unknown:
        raise ValueError(f"unknown transfer task(s) {unknown}; choose from {TASKS}")
    if mrpc_features not in MRPC_FEATURES:
        raise ValueError(f"mrpc_features must be one of {MRPC_FEATURES}, got '{mrpc_features}'")
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
            results[task] = evaluate_task(task, encode, folder, seed, max_train, kfold, inner_kfold, mrpc_features)
        for w in caught:
            if not issubclass(w.category, ConvergenceWarning):
                warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
        unconverged = sum(issubclass(w.category, ConvergenceWarning) for w in caught)
        if unconverged:
            results[task]["unconverged_fits"] = unconverged
            log.warning("%s: %d logistic-regression fits hit max_iter", task, unconverged)
        results[task]["seconds"] = round(time.perf_counter() - start, 1)
        log.info("%s: acc %.2f (%.1f s)", task, results[task]["acc"], results[task]["seconds"])
    done = [t for t in tasks if "acc" in results[t]]
    return {
        "tasks": results,
        "avg": float(np.mean([results[t]["acc"] for t in done])) if done else None,
        "avg_over": done,
        "settings": {
            "seed": seed,
            "max_train": max_train,
            "kfold": kfold,
            "inner_kfold": kfold if inner_kfold is None else inner_kfold,
            "c_grid_cv_and_split": list(C_GRID_SPLIT),
            "c_grid_kfold": list(C_GRID_KFOLD),
            "mrpc_features": mrpc_features,
            "data_dir": str(data_dir),
        },
    }


def to_markdown(result: dict, title: str = "SentEval transfer") -> str:
    s = result["settings"]
    lines = [
        f"# {title}",
        "",
        f"Logistic regression on frozen embeddings; seed {s['seed']}, {s['kfold']}-fold CV, inner "
        f"{s['inner_kfold']}-fold, max_train {s['max_train']}, MRPC features {s['mrpc_features']}.",
        "",
        "| task | acc | F1 | dev acc | train | test | protocol | seconds |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for task, r in result["tasks"].items():
        if "skipped" in r:
            lines.append(f"| {task} | skipped: {r['skipped']} | | | | | | |")
            continue
        train = r.get("n_train", r.get("n"))
        full = r.get("n_train_full", r.get("n_full"))
        train_txt = f"{train}" + (f" of {full}" if full != train else "")
        test_txt = r.get("n_test", "CV")
        f1 = f"{r['f1']:.2f}" if "f1" in r else ""
        dev = "" if r["devacc"] is None else f"{r['devacc']:.2f}"
        lines.append(
            f"| {task} | {r['acc']:.2f} | {f1} | {dev} | {train_txt} | {test_txt} | {r['protocol']} | {r['seconds']} |"
        )
    if result["avg"] is not None:
        lines += ["", f"Average accuracy over {', '.join(result['avg_over'])}: {result['avg']:.2f}"]
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(
        description="SentEval transfer tasks with logistic regression on frozen embeddings."
    )
    parser.add_argument("--model", required=True, help="minilm, tiny, a Hub name or a local model folder")
    parser.add_argument("--pooling", default="mean", choices=("mean", "cls", "cls_before_pooler"))
    parser.add_argument(
        "--data-dir", default="../shared/data/senteval/downstream", help="SentEval data/downstream folder"
    )
    parser.add_argument("--out", default="outputs/transfer", help="folder for transfer.md and transfer.json")
    parser.add_argument("--tasks", nargs="+", default=list(TASKS), choices=TASKS)
    parser.add_argument("--max-train", type=int, default=None, help="subsample training sets (CV pools) to this size")
    parser.add_argument(
        "--max-length", type=int, default=128, help="token limit when embedding (SentEval does not truncate)"
    )
    parser.add_argument("--batch-size", type=int, default=128)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--kfold", type=int, default=10)
    parser.add_argument("--inner-kfold", type=int, default=None, help="default: same as --kfold; 0 = C fixed to 1")
    parser.add_argument("--mrpc-features", default="senteval", choices=MRPC_FEATURES)
    parser.add_argument("--threads", type=int, default=None, help="torch CPU threads for embedding (default: torch's)")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")

    import torch

    if args.threads:
        torch.set_num_threads(args.threads)
    from lightning_modules.encoder import TextEncoder

    start = time.perf_counter()
    encoder = TextEncoder.from_name(args.model, pooling=args.pooling, max_length=args.max_length)
    encode = lambda texts: encoder.encode(texts, batch_size=args.batch_size).numpy()  # noqa: E731
    result = evaluate_transfer(
        encode, args.data_dir, args.tasks, args.seed, args.max_train, args.kfold, args.inner_kfold, args.mrpc_features
    )
    result["settings"].update(
        model=args.model, pooling=args.pooling, max_length=args.max_length, torch_threads=torch.get_num_threads()
    )
    result["seconds"] = round(time.perf_counter() - start, 1)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "transfer.json").write_text(json.dumps(result, indent=2))
    markdown = to_markdown(result, f"SentEval transfer: {args.model} ({args.pooling} pooling)")
    markdown += f"\nTotal wall time {result['seconds']} s.\n"
    (out / "transfer.md").write_text(markdown)
    print(markdown)
    return result


if __name__ == "__main__":
    main()
