"""The SentEval toolkit itself on our encoder: ``python tools.py transfer --protocol senteval-toolkit``.

For users who have SentEval installed (it is not on PyPI; see ``INSTALL``): our encoder is handed
to ``senteval.engine.SE(params, batcher, prepare)`` as its batcher, so the numbers are the
toolkit's own, for any model or run this project can load. SentEval reads the task files itself
from ``<task_path>/downstream/<task>``, so ``data_dir`` must be a folder named ``downstream``.

- ``prepare(params, samples)`` does nothing (the encoder needs no vocabulary);
- ``batcher(params, batch)`` gets a batch of token lists (tokens may be ``bytes``), joins each
  with single spaces, as SentEval's own examples do, and returns the float32 embeddings [B, d].

The classifier configuration comes from the same ``setting`` names as ``--protocol senteval``
(``evaluation.benchmarks.senteval.classifier.SETTINGS``). SentEval's PyTorch classifier moves its model to
CUDA unconditionally, so on a machine without CUDA the toolkit's scikit-learn path
(``usepytorch=False``) is what runs unless ``toolkit_classifier="pytorch"`` is asked for; the
result names the path that ran.
"""

from __future__ import annotations

import importlib
import logging
import time
from pathlib import Path
from typing import Callable, Sequence

import numpy as np

from evaluation.benchmarks.senteval import classifier as senteval_classifier
from textcore.errors import UserError

log = logging.getLogger(__name__)

REPOSITORY = "https://github.com/facebookresearch/SentEval"
INSTALL = (
    "SentEval is not installed (Python cannot import the module 'senteval'). It is not on PyPI; install it "
    f"from its repository: `git clone {REPOSITORY} && .venv/bin/pip install -e SentEval` (needs network), "
    "or use --protocol senteval (this project's implementation of its PyTorch classifier)."
)
# our task names -> SentEval's
TOOLKIT_TASKS = {
    "MR": "MR",
    "CR": "CR",
    "SUBJ": "SUBJ",
    "MPQA": "MPQA",
    "SST2": "SST2",
    "TREC": "TREC",
    "MRPC": "MRPC",
    "SICKE": "SICKEntailment",
}
TOOLKIT_VALIDATION = {
    "MR": "SentEval InnerKFoldClassifier",
    "CR": "SentEval InnerKFoldClassifier",
    "SUBJ": "SentEval InnerKFoldClassifier",
    "MPQA": "SentEval InnerKFoldClassifier",
    "SST2": "SentEval SplitClassifier",
    "SICKE": "SentEval SplitClassifier",
    "TREC": "SentEval KFoldClassifier",
    "MRPC": "SentEval KFoldClassifier",
}
TOOLKIT_CLASSIFIERS = ("pytorch", "sklearn")


class SentEvalNotInstalled(UserError, ImportError):
    """``senteval`` cannot be imported; the message says how to install it."""


def import_senteval():
    """``senteval.engine``, or ``SentEvalNotInstalled`` with the install instructions."""
    try:
        return importlib.import_module("senteval.engine")
    except ModuleNotFoundError as missing:
        if (missing.name or "").split(".")[0] == "senteval":
            raise SentEvalNotInstalled(INSTALL) from missing
        raise SentEvalNotInstalled(
            f"SentEval is installed but cannot be imported: its dependency '{missing.name}' is missing "
            f"(.venv/bin/pip install {missing.name})."
        ) from missing


def make_prepare_and_batcher(encode: Callable[[list[str]], np.ndarray]):
    """SentEval's ``prepare`` and ``batcher`` callbacks around ``encode`` (list of texts -> [n, d])."""

    def prepare(params, samples):
        return None

    def batcher(params, batch):
        sentences = [
            " ".join(token.decode("utf-8") if isinstance(token, bytes) else str(token) for token in tokens)
            for tokens in batch
        ]
        embeddings = np.asarray(encode(sentences), dtype=np.float32)  # [B, d]
        if embeddings.ndim != 2 or embeddings.shape[0] != len(sentences):
            raise ValueError(
                f"encode returned shape {embeddings.shape} for {len(sentences)} sentences; expected [n, d]."
            )
        return embeddings

    return prepare, batcher


def _usepytorch(toolkit_classifier: str | None) -> bool:
    import torch

    if toolkit_classifier is None:
        if torch.cuda.is_available():
            return True
        log.warning(
            "senteval-toolkit: no CUDA device, and SentEval's PyTorch classifier needs one: running the toolkit's "
            "scikit-learn path (usepytorch=False). --protocol senteval gives the PyTorch classifier on CPU."
        )
        return False
    if toolkit_classifier not in TOOLKIT_CLASSIFIERS:
        raise senteval_classifier.ProbeSettingsError(
            f"toolkit_classifier '{toolkit_classifier}': choose from {TOOLKIT_CLASSIFIERS} (or leave it unset)."
        )
    return toolkit_classifier == "pytorch"


def toolkit_params(
    data_dir: str | Path,
    setting: str = "default",
    seed: int | None = None,
    kfold: int | None = None,
    classifier: dict | None = None,
    usepytorch: bool = True,
    batch_size: int = 128,
) -> dict:
    """SentEval's ``params`` for our options; ``data_dir`` must be SentEval's ``.../downstream`` folder."""
    data_dir = Path(data_dir)
    if data_dir.name != "downstream":
        raise senteval_classifier.ProbeSettingsError(
            f"senteval-toolkit: SentEval reads <task_path>/downstream/<task>, so the data folder must be named "
            f"'downstream'; got '{data_dir}'."
        )
    overrides = {**(classifier or {}), **({"kfold": kfold} if kfold is not None else {})}
    probe = senteval_classifier.probe_settings(setting, overrides)
    return {
        "task_path": str(data_dir.parent),
        "usepytorch": usepytorch,
        "kfold": probe.kfold,
        "seed": senteval_classifier.DEFAULT_SEED if seed is None else seed,
        "batch_size": batch_size,
        "classifier": {k: v for k, v in probe.as_dict().items() if k != "kfold"},
    }


def check_toolkit_options(options: dict) -> None:
    """Fail early (before a model is trained or loaded) when the toolkit or an option is wrong."""
    for key in ("max_train", "inner_kfold"):
        if options.get(key) is not None:
            raise senteval_classifier.ProbeSettingsError(
                f"protocol=senteval-toolkit reads and splits the data itself; '{key}' cannot be applied to it."
            )
    if options.get("toolkit_classifier") not in (None, *TOOLKIT_CLASSIFIERS):
        _usepytorch(options["toolkit_classifier"])
    overrides = {**(options.get("classifier") or {}), **({"kfold": options["kfold"]} if options.get("kfold") else {})}
    senteval_classifier.probe_settings(options.get("setting", "default"), overrides)
    import_senteval()


def _task_result(task: str, raw: dict) -> dict:
    out = {"acc": float(raw["acc"]), "devacc": float(raw["devacc"]) if "devacc" in raw else None}
    if "f1" in raw:
        out["f1"] = float(raw["f1"])
    if task in ("MR", "CR", "SUBJ", "MPQA"):
        out["n"] = raw.get("ntest")
    elif task in ("TREC", "MRPC"):
        out.update(n_train=raw.get("ndev"), n_test=raw.get("ntest"))
    else:
        out.update(n_dev=raw.get("ndev"), n_test=raw.get("ntest"))
    out["protocol"] = TOOLKIT_VALIDATION[task]
    return out


def run_toolkit(
    encode: Callable[[list[str]], np.ndarray],
    data_dir: str | Path,
    tasks: Sequence[str],
    setting: str = "default",
    seed: int | None = None,
    kfold: int | None = None,
    classifier: dict | None = None,
    toolkit_classifier: str | None = None,
    batch_size: int = 128,
) -> dict:
    """Each task through ``senteval.engine.SE(...).eval``; the result has ``evaluate_transfer``'s shape."""
    from evaluation.benchmarks.senteval.tasks import present_tasks, summarise

    engine = import_senteval()
    data_dir = Path(data_dir)
    usepytorch = _usepytorch(toolkit_classifier)
    params = toolkit_params(data_dir, setting, seed, kfold, classifier, usepytorch, batch_size)
    prepare, batcher = make_prepare_and_batcher(encode)
    se = engine.SE(params, batcher, prepare)
    results: dict[str, dict] = {}
    for task, _ in present_tasks(data_dir, tasks, results):  # the toolkit finds the folder itself
        start = time.perf_counter()
        results[task] = _task_result(task, se.eval(TOOLKIT_TASKS[task]))
        results[task]["seconds"] = round(time.perf_counter() - start, 1)
        log.info("%s: acc %.2f (%.1f s, SentEval toolkit)", task, results[task]["acc"], results[task]["seconds"])
    version = getattr(importlib.import_module("senteval"), "__version__", "unknown version")
    path = "usepytorch=True (PyTorch classifier)" if usepytorch else "usepytorch=False (scikit-learn path)"
    c = params["classifier"]
    description = (
        f"SentEval {version}, {path}; setting `{setting}`: kfold {params['kfold']}, optim {c['optim']}, "
        f"batch {c['batch_size']}, epoch_size {c['epoch_size']}, tenacity {c['tenacity']}, nhid {c['nhid']}; "
        f"seed {params['seed']}."
    )
    settings = {"toolkit_params": {k: v for k, v in params.items()}, "setting": setting, "toolkit_version": version}
    return summarise(results, tasks, "senteval-toolkit", description, settings, None, "senteval", data_dir)
