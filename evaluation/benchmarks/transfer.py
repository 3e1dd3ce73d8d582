"""SentEval transfer tasks on frozen sentence embeddings (docs/evaluation.md), under a named protocol.

Tasks: MR, CR, SUBJ, MPQA, SST-2, TREC, MRPC (the seven of the SimCSE, PairSupCon and ClusterNS
tables) and, when asked for, SICK-E (``SICKE``). Three protocols; every table and JSON file says
which one produced its numbers:

- ``senteval`` (the default): SentEval's PyTorch logistic regression (``usepytorch=True``), the
  protocol behind the papers' transfer tables, in our own code (``evaluation.benchmarks.senteval.classifier``):
  a linear layer on the embeddings, weight decay from {1e-5, 1e-4, 1e-3, 1e-2} chosen by
  cross-validation, early stopping on held-out data, SentEval's folds (``StratifiedKFold`` with
  shuffle and seed 1111 on the rows in SentEval's order: sorted by token count then label, pairs
  by the token counts of both sentences then label) and SentEval's ``default`` setting (10-fold,
  Adam, batch 64, epoch_size 4, tenacity 5) or ``prototyping`` setting (5-fold, RMSprop, batch
  128, epoch_size 2, tenacity 3). As in SentEval, empty lines of MR/CR/SUBJ/MPQA are kept and
  embedded as empty sentences (CR 3,775 and MPQA 10,606 examples).
- ``sklearn``: scikit-learn logistic regression with the grids of SentEval's ``usepytorch=False``
  path (``evaluation.benchmarks.senteval.protocols``). Not what the papers report.
- ``senteval-toolkit``: the SentEval package itself, when installed, with our encoder as its
  batcher (``evaluation.benchmarks.senteval.toolkit``).

``max_train`` (optional) draws a stratified random subsample of at most that many training
examples (for MR/CR/SUBJ/MPQA: of the whole CV pool) for quick CPU runs; it is recorded in the
output, and results with it are not comparable to published numbers.

The task files are read by ``evaluation.benchmarks.senteval.readers``, the classifiers and protocols are
``evaluation.benchmarks.senteval.protocols``.
"""
from __future__ import annotations

import inspect
import json
import logging
import time
import warnings
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Sequence

import numpy as np

from evaluation.benchmarks.senteval.readers import (
    ALL_TASKS,
    CV_TASKS,
    PAIR_TASKS,
    SICK_LABELS,
    TASKS,
    TREC_CLASSES,
    Split,
    read_binary,
    read_mrpc,
    read_sick_entailment,
    read_sst2,
    read_trec,
    senteval_order,
)
from evaluation.benchmarks.senteval.tasks import (
    MRPC_FEATURES,
    PROTOCOL_NAMES,
    TransferOptionsError,
    present_tasks,
    summarise,
)

# the classifiers (torch, scikit-learn) are imported where they are used: `tools.py transfer --help` needs neither
if TYPE_CHECKING:
    from evaluation.benchmarks.senteval.protocols import SentEvalProtocol, SklearnProtocol

Encode = Callable[[list[str]], np.ndarray]
log = logging.getLogger(__name__)


# -- options -------------------------------------------------------------------------------------
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
        from evaluation.benchmarks.senteval.toolkit import check_toolkit_options

        check_toolkit_options(options)
        return
    from evaluation.benchmarks.senteval.protocols import make_protocol

    keys = ("seed", "kfold", "inner_kfold", "setting", "classifier", "jobs")
    make_protocol(protocol, **{k: options[k] for k in keys if k in options})


# -- driver --------------------------------------------------------------------------------------
def _subsample(split: Split, max_train: int | None, seed: int) -> Split:
    if max_train is None or len(split) <= max_train:
        return split
    from sklearn.model_selection import train_test_split

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
        from evaluation.benchmarks.senteval.protocols import pair_features

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
    - ``protocol="senteval-toolkit"``: ``evaluation.benchmarks.senteval.toolkit.run_toolkit`` (``setting``,
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
        from evaluation.benchmarks.senteval.toolkit import run_toolkit

        if max_train is not None or inner_kfold is not None or mrpc_features != "senteval":
            raise TransferOptionsError(
                "protocol=senteval-toolkit reads and splits the data itself: max_train, inner_kfold and "
                "mrpc_features cannot be applied to it."
            )
        return run_toolkit(encode, data_dir, tasks, setting, seed, kfold, classifier, toolkit_classifier, batch_size)
    if toolkit_classifier is not None:
        raise TransferOptionsError("toolkit_classifier is an option of protocol=senteval-toolkit only.")
    from sklearn.exceptions import ConvergenceWarning

    from evaluation.benchmarks.senteval.protocols import make_protocol

    proto = make_protocol(protocol, seed, kfold, inner_kfold, setting, classifier, jobs)
    results: dict[str, dict] = {}
    for task, folder in present_tasks(data_dir, tasks, results):
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


def evaluate_model_transfer(model: str, pooling: str | None = None, data_dir: str | Path | None = None,
                            output: str | Path = "outputs/transfer", tasks: Sequence[str] = TASKS,
                            protocol: str = "senteval", setting: str = "default", max_train: int | None = None,
                            max_length: int = 128, batch_size: int = 128, seed: int | None = None,
                            kfold: int | None = None, inner_kfold: int | None = None, mrpc_features: str = "senteval",
                            jobs: int = 1, toolkit_classifier: str | None = None, threads: int | None = None,
                            trust_checkpoint: bool = False) -> dict:
    """``python tools.py transfer``: a model reference on the transfer ``tasks`` under ``protocol``;
    ``transfer.json`` and ``transfer.md`` in ``output``, the table on stdout. ``threads``: torch's CPU threads."""
    import torch

    if threads:
        torch.set_num_threads(threads)
    from evaluation.model_io.load import load_encoder

    options = dict(tasks=list(tasks), seed=seed, max_train=max_train, kfold=kfold, inner_kfold=inner_kfold,
                   mrpc_features=mrpc_features, protocol=protocol, setting=setting, jobs=jobs,
                   toolkit_classifier=toolkit_classifier, batch_size=batch_size)
    if protocol != "senteval-toolkit":
        del options["toolkit_classifier"], options["batch_size"]
    check_transfer_options(options)  # before loading the model
    start = time.perf_counter()
    encoder, pooling = load_encoder(model, pooling, trust_checkpoint)
    encoder.max_length = max_length
    encode = lambda texts: encoder.encode(texts, batch_size=batch_size, pooling=pooling).numpy()  # noqa: E731
    from datamodules.download.catalogue import data_root

    data_dir = data_dir or data_root() / "senteval" / "downstream"
    result = evaluate_transfer(encode, data_dir, **options)
    result["settings"].update(
        model=model, pooling=pooling, max_length=max_length, torch_threads=torch.get_num_threads()
    )
    result["seconds"] = round(time.perf_counter() - start, 1)
    out = Path(output)
    out.mkdir(parents=True, exist_ok=True)
    (out / "transfer.json").write_text(json.dumps(result, indent=2))
    markdown = to_markdown(result, f"SentEval transfer: {model} ({pooling} pooling)")
    markdown += f"\nTotal wall time {result['seconds']} s.\n"
    (out / "transfer.md").write_text(markdown)
    print(markdown)
    return result

