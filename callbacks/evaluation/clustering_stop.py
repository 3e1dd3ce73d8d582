"""Early stopping on the clusters' stability, without labels: training ends once the evaluations stop moving texts.

SCCL's authors stop "when the predictions stay roughly the same". This callback reads the share of texts that
changed cluster between two evaluations (``<kmeans|head>_changed``, made by the clustering evaluator,
``callbacks.evaluation.clustering_eval``) and stops once ``patience`` evaluations in a row each changed fewer
than ``when_changed_below``. The rule is a pure function (``evaluation.clustering.label_free.stable_step``); the
evaluator's history, which the rule reads, and its record of the stop are checkpointed, so a resumed run applies
it exactly.
"""
from __future__ import annotations

import logging

from lightning.pytorch.callbacks import Callback

from callbacks.evaluation.clustering_eval import CONFIG_SECTION as EVALUATOR_SECTION
from callbacks.evaluation.clustering_eval import evaluator_before, whole_number
from evaluation.clustering.label_free import stable_step
from textcore.errors import ConfigError

log = logging.getLogger(__name__)

CONFIG_SECTION = "dataset.callbacks.clustering_stop"  # where conf/ keeps this callback's settings (error messages)


def stops_now(history: list[dict], key: str, below: float, patience: int) -> bool:
    """Whether the last evaluation of ``history`` is the one that closes the first run of ``patience``
    consecutive evaluations with ``key`` < ``below`` (later ones would only repeat the decision)."""
    done = stable_step(history, key, below, patience)
    return done is not None and done == len(history) - 1


def stop_rule(key: str, below: float, patience: int) -> str:
    """The rule in words, as results.json ``clustering.stopped_early.rule`` records it."""
    return f"{key} < {below} in {patience} consecutive evaluations"


class ClusteringEarlyStopping(Callback):
    """Stops training once ``patience`` consecutive clustering evaluations each changed the cluster of fewer than
    ``when_changed_below`` of the texts (e.g. 0.01); None: never stops (the callback does nothing).

    Args:
        when_changed_below: a share in (0, 1), or None.
        patience: evaluations in a row.
        key: ``kmeans_changed`` (KMeans of the embeddings) or ``head_changed`` (the method's cluster head).
    Needs the clustering evaluator (``dataset.callbacks.clustering_eval``, with ``label_free: true``) listed before
    it; the stop is recorded there (results.json ``clustering.stopped_early``).
    """

    def __init__(self, when_changed_below: float | None = None, patience: int = 3, key: str = "kmeans_changed"):
        share = when_changed_below
        if share is not None and (isinstance(share, (bool, str)) or not 0 < share < 1):
            raise ConfigError(f"{CONFIG_SECTION}.when_changed_below={share!r}: a share in (0, 1), e.g. 0.01, "
                              "or null to never stop early")
        whole_number(CONFIG_SECTION, "patience", patience, 1, "evaluations in a row")
        if key not in ("kmeans_changed", "head_changed"):
            raise ConfigError(f"{CONFIG_SECTION}.key={key}: kmeans_changed or head_changed")
        self.when_changed_below = when_changed_below
        self.patience = patience
        self.key = key
        self._evaluator = None

    def setup(self, trainer, pl_module, stage: str) -> None:
        if self.when_changed_below is None:
            return
        self._evaluator = evaluator_before(trainer, self, CONFIG_SECTION)
        if self._evaluator is None:
            raise ConfigError(f"{CONFIG_SECTION}.when_changed_below={self.when_changed_below} watches the clustering "
                              f"evaluations, but this run has none ({EVALUATOR_SECTION})")
        if self._evaluator.label_free_sample is None:
            raise ConfigError(f"{CONFIG_SECTION}.when_changed_below needs {EVALUATOR_SECTION}.label_free=true "
                              "(the share of changed assignments)")

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        evaluator = self._evaluator
        if evaluator is None or evaluator.stopped_early is not None:
            return
        history = evaluator.history
        if not history or history[-1]["step"] != trainer.global_step:
            return  # no evaluation at this step
        stop = stops_now(history, self.key, self.when_changed_below, self.patience)
        if trainer.strategy.reduce_boolean_decision(stop, all=False):
            rule = stop_rule(self.key, self.when_changed_below, self.patience)
            evaluator.record_stop(trainer.global_step, rule)
            trainer.should_stop = True
            log.info("stopping at step %d: %s", trainer.global_step, rule)
