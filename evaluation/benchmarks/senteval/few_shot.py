"""Few-shot transfer (PairSupCon, Table 6): SentEval tasks with a few labelled examples per class.

    python tools.py evaluate --model <run | folder | Hub name> --tasks few_shot \
        [--few-shot-k 16] [--few-shot-sets 5]

For each task, ``sets`` training sets are drawn, each with ``k`` examples of every class (a generator
seeded by (seed, set)); a logistic regression (scikit-learn, C = 1, lbfgs) is fitted on their frozen
embeddings and scored on the task's test split (SST-2, TREC, MRPC), or, for the tasks without one (MR,
CR, SUBJ, MPQA), on every example not drawn. The table reports the mean (standard deviation) accuracy
over the sets, as PairSupCon's Table 6 does; MRPC uses SentEval's pair features [|u - v|, u * v].
The paper gives the shots and the number of sets, not the classifier: this one is named in every table.
"""
from __future__ import annotations

import time
import warnings
from pathlib import Path
from typing import Callable, Sequence

import numpy as np

from evaluation.benchmarks.senteval.protocols import TransferOptionsError, pair_features
from evaluation.benchmarks.senteval.readers import (
    CV_TASKS,
    PAIR_TASKS,
    TASKS,
    Split,
    read_binary,
    read_mrpc,
    read_sst2,
    read_trec,
)
from evaluation.benchmarks.senteval.tasks import TASK_FOLDERS

PROTOCOL = "few-shot: {k} examples per class, {sets} sampled training sets, scikit-learn logistic regression (C = 1)"
READERS = {"SST2": read_sst2, "TREC": read_trec, "MRPC": read_mrpc}


def draw(labels: np.ndarray, k: int, rng: np.random.Generator) -> np.ndarray:
    """Indices of ``k`` examples of every class (all of a class that has fewer), sorted."""
    picked = []
    for label in np.unique(labels):
        members = np.flatnonzero(labels == label)
        picked.append(rng.choice(members, size=min(k, len(members)), replace=False))
    return np.sort(np.concatenate(picked))


def _features(encode, split: Split, task: str) -> np.ndarray:
    u = np.asarray(encode(list(split.texts)), dtype=np.float64)
    if task in PAIR_TASKS:
        return pair_features(u, np.asarray(encode(list(split.texts_b)), dtype=np.float64), "senteval")
    return u


def few_shot_task(encode, folder: Path, task: str, k: int = 16, sets: int = 5, seed: int = 0) -> dict:
    """Accuracies (%) of one task over ``sets`` draws of ``k`` examples per class."""
    from sklearn.linear_model import LogisticRegression

    if task in CV_TASKS:
        pool = read_binary(folder, task)
        test = None
    elif task in READERS:
        splits = READERS[task](folder)
        pool, test = splits["train"], splits["test"]
    else:
        raise TransferOptionsError(f"few-shot transfer has no task '{task}'; choose from {TASKS}")
    X_pool = _features(encode, pool, task)
    X_test = None if test is None else _features(encode, test, task)
    accs = []
    for s in range(sets):
        idx = draw(pool.labels, k, np.random.default_rng([seed, s]))
        classifier = LogisticRegression(C=1.0, max_iter=2000)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # a few dozen points: lbfgs may stop at max_iter, the score is kept
            classifier.fit(X_pool[idx], pool.labels[idx])
        if test is None:
            rest = np.setdiff1d(np.arange(len(pool)), idx)
            accs.append(100 * float(classifier.score(X_pool[rest], pool.labels[rest])))
        else:
            accs.append(100 * float(classifier.score(X_test, test.labels)))
    return {"acc": float(np.mean(accs)), "acc_std": float(np.std(accs)), "accs": accs,
            "n_train": int(len(draw(pool.labels, k, np.random.default_rng([seed, 0])))),
            "n_test": int(len(test) if test is not None else len(pool) - len(idx))}


def evaluate_few_shot(encode: Callable, data_dir: str | Path, tasks: Sequence[str] = TASKS, k: int = 16,
                      sets: int = 5, seed: int = 0, log: Callable[[str], None] | None = None) -> dict:
    """Every task whose SentEval folder exists; the others are reported as skipped."""
    if k < 1 or sets < 1:
        raise TransferOptionsError(f"few-shot needs k >= 1 examples per class and sets >= 1 (got {k}, {sets})")
    data_dir = Path(data_dir)
    results: dict[str, dict] = {}
    for task in tasks:
        folder = data_dir / TASK_FOLDERS[task]
        if not folder.is_dir():
            results[task] = {"skipped": f"folder '{folder}' not found"}
            continue
        start = time.perf_counter()
        results[task] = few_shot_task(encode, folder, task, k, sets, seed)
        results[task]["seconds"] = round(time.perf_counter() - start, 1)
        if log:
            log(f"few-shot {task}: {results[task]['acc']:.2f} ({results[task]['acc_std']:.2f})")
    done = [t for t, r in results.items() if "acc" in r]
    return {"protocol": PROTOCOL.format(k=k, sets=sets), "k": k, "sets": sets, "seed": seed, "tasks": results,
            "avg_over": done, "avg": float(np.mean([results[t]["acc"] for t in done])) if done else None}


def markdown_table(result: dict, label: str) -> str:
    lines = [f"Protocol: {result['protocol']}; accuracy mean (std) over the sets, %.", "",
             f"| task | {label} | train | test |", "|---|---|---|---|"]
    for task, r in result["tasks"].items():
        if "skipped" in r:
            lines.append(f"| {task} | skipped: {r['skipped']} | | |")
        else:
            lines.append(f"| {task} | {r['acc']:.2f} ({r['acc_std']:.2f}) | {r['n_train']} | {r['n_test']} |")
    if result["avg"] is not None:
        lines.append(f"| average ({len(result['avg_over'])} tasks) | {result['avg']:.2f} | | |")
    return "\n".join(lines) + "\n"
