"""What the resumable Optuna sweeper (``hydra_plugins/resumable_optuna``) needs to know about a study's storage:
the SQLite file to create, and how many trials the study already holds."""
from __future__ import annotations

from pathlib import Path
from typing import Any


def sqlite_file(storage: Any) -> Path | None:
    """The database file of an ``sqlite:///<path>`` storage URL (None for other storages)."""
    text = str(storage or "")
    return Path(text[len("sqlite:///"):]) if text.startswith("sqlite:///") else None


def trials_in_storage(storage: Any, study_name: str | None) -> int:
    """Trials the named study already holds in ``storage`` (0: no storage, no such study yet)."""
    if not storage or not study_name:
        return 0
    path = sqlite_file(storage)
    if path is not None and not path.is_file():
        return 0
    import optuna

    summaries = optuna.get_all_study_summaries(storage=str(storage))
    return next((s.n_trials for s in summaries if s.study_name == study_name), 0)
