"""Configuration keys a user's command line may still carry under an old name: each stops the run with a line
that names the key it became and the fix. One table for every renamed or moved key; the configuration check
(``validation.settings``) and a component that still accepts an old argument (the clustering evaluator) both ask
it. When and why each key moved: docs/history/changes.md."""
from __future__ import annotations

from typing import Any

from omegaconf import DictConfig

from textcore.errors import ConfigError
from validation.lookup import ABSENT, select

# old key -> (new key, why it moved)
RENAMED_KEYS = {
    "choose_k.seeds": ("choose_k.kmeans_runs", "the same setting under its new name"),
    "dataset.callbacks.clustering_eval.stop_when_changed_below": (
        "dataset.callbacks.clustering_stop.when_changed_below", "early stopping is its own callback"),
    "dataset.callbacks.clustering_eval.stop_patience": (
        "dataset.callbacks.clustering_stop.patience", "early stopping is its own callback"),
    "dataset.callbacks.clustering_eval.stop_key": (
        "dataset.callbacks.clustering_stop.key", "early stopping is its own callback"),
}


def refuse_renamed(old: str, value: Any) -> None:
    """A value given to the old key ``old`` (None and absent are no value): ``ConfigError`` naming the new key."""
    if value is None or value is ABSENT:
        return
    new, why = RENAMED_KEYS[old]
    raise ConfigError(f"{old}={value} is now {new} ({why}): set {new}={value}.")


def check_renamed_keys(cfg: DictConfig) -> None:
    for old in RENAMED_KEYS:
        refuse_renamed(old, select(cfg, old))
