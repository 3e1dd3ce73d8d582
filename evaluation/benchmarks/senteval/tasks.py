"""The SentEval transfer tasks, the protocols that score them, and the summary every protocol returns.

Shared by ``evaluation.benchmarks.transfer`` (our protocols) and ``evaluation.benchmarks.senteval.toolkit``
(the original
toolkit as engine), so both write the same result layout.
"""
from __future__ import annotations

import warnings
from collections.abc import Iterable, Iterator
from pathlib import Path

import numpy as np

from textcore.errors import UserError

TASK_FOLDERS = {
    "MR": "MR",
    "CR": "CR",
    "SUBJ": "SUBJ",
    "MPQA": "MPQA",
    "SST2": "SST/binary",
    "TREC": "TREC",
    "MRPC": "MRPC",
    "SICKE": "SICK",
}
PROTOCOLS = ("senteval", "sklearn", "senteval-toolkit")
PROTOCOL_NAMES = {
    "senteval": "SentEval PyTorch logistic regression (the papers' protocol), our implementation",
    "sklearn": "scikit-learn logistic regression (SentEval's usepytorch=False grids; not the papers' protocol)",
    "senteval-toolkit": "the SentEval toolkit itself (senteval.engine.SE) with our encoder as its batcher",
}
MRPC_FEATURES = ("senteval", "full")
# the keys of classifier.SETTINGS (SentEval's README configurations), named here so that the transfer tool's
# options are known without importing torch and scikit-learn (`tools.py transfer --help`)
SETTING_NAMES = ("default", "prototyping")


class TransferOptionsError(UserError, ValueError):
    """A transfer option (protocol, setting, fold count...) is unknown or inconsistent."""



def present_tasks(data_dir: Path, tasks: Iterable[str], results: dict) -> Iterator[tuple[str, Path]]:
    """(task, its SentEval folder) for each task whose folder exists; a missing one is warned about and
    recorded in ``results`` as skipped: it costs its row, not the whole table."""
    for task in tasks:
        folder = Path(data_dir) / TASK_FOLDERS[task]
        if folder.is_dir():
            yield task, folder
            continue
        reason = f"folder '{folder}' not found"
        warnings.warn(f"transfer task {task} skipped: {reason}", stacklevel=3)
        results[task] = {"skipped": reason}


def summarise(results, tasks, protocol, description, settings, max_train, mrpc_features, data_dir) -> dict:
    done = [t for t in tasks if "acc" in results[t]]
    return {
        "tasks": results,
        "avg": float(np.mean([results[t]["acc"] for t in done])) if done else None,
        "avg_over": done,
        "protocol": protocol,
        "protocol_name": PROTOCOL_NAMES[protocol],
        "protocol_description": description,
        "settings": {
            **settings,
            "protocol": protocol,
            "max_train": max_train,
            "mrpc_features": mrpc_features,
            "data_dir": str(data_dir),
        },
    }
