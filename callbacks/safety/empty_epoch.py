"""Stops a run whose training data yields no batch in an epoch.

A data source can come up empty in an epoch: a streamed NLI file whose pairs are all neutral, a
shard of a DDP rank that received nothing, fewer texts than ``batch_size`` with ``drop_last``.
Lightning then starts the next (equally empty) epoch, and with a step budget
(``trainer.max_steps``, ``max_epochs=-1``) it does so forever. This callback raises
:class:`EmptyEpochError` at the end of such an epoch.

The one empty epoch that is expected is the first one after resuming from a checkpoint saved at
the very end of an epoch: it is not counted. Needs nothing on the module.
"""
from __future__ import annotations

from lightning.pytorch.callbacks import Callback

from textcore.errors import UserError


class EmptyEpochError(UserError, RuntimeError):
    """An epoch without a training batch; the message names the data and what to check."""


def describe_data(datamodule) -> str:
    """The data file(s) of ``datamodule`` for the message, as far as it tells."""
    for attribute in ("path", "file"):
        value = getattr(datamodule, attribute, None)
        if value:
            return f"'{value}'"
    return type(datamodule).__name__ if datamodule is not None else "the training data"


class EmptyEpochGuard(Callback):
    """Raises when an epoch ends without a single training batch (see the module docstring)."""

    def __init__(self):
        self._batches = 0
        self._epochs_seen = 0

    def on_train_epoch_start(self, trainer, pl_module) -> None:
        self._batches = 0

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx) -> None:
        self._batches += 1

    def on_train_epoch_end(self, trainer, pl_module) -> None:
        first_after_resume = self._epochs_seen == 0 and trainer.ckpt_path is not None
        self._epochs_seen += 1
        if self._batches or first_after_resume:
            return
        datamodule = getattr(trainer, "datamodule", None)
        batch_size = getattr(datamodule, "batch_size", None)
        raise EmptyEpochError(
            f"epoch {trainer.current_epoch} produced no training batch: {describe_data(datamodule)} yielded no "
            f"usable item{f' (batch_size={batch_size})' if batch_size else ''}, and every further epoch would "
            "be empty too. Check the data file and its filters (e.g. an NLI file with only neutral pairs, an "
            "empty shard under DDP, fewer texts than batch_size with dataset.drop_last=true)."
        )
