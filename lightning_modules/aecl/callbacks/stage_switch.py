"""AECL's three training stages by epoch (AECL Algorithm 1; docs/methods/aecl.md)."""
from __future__ import annotations

import torch
from lightning.pytorch.callbacks import Callback
from lightning.pytorch.utilities import rank_zero_warn

from lightning_modules.shared.eval_outputs import cached_eval_outputs
from textcore.cluster_space import SpaceSettings, space_kmeans
from textcore.errors import ConfigError, WrongMethodError
from textcore.kmeans import check_kmeans_backend, kmeans_fit

MODULE_NEEDS = ("stage", "set_stage", "set_pseudo_labels", "pseudo_label_epoch", "num_clusters", "eval_step")


SCHEDULES = ("paper", "reference")
PSEUDO_LABELS = ("every_epoch", "once")


def stage1_epochs(e1: int, schedule: str = "paper") -> int:
    """Epochs of stage 1: ``e1`` (Algorithm 1), or ``e1 + 1`` as the reference code runs it (its 0-based
    epoch loop keeps stage 1 while ``epoch <= E1``)."""
    if schedule not in SCHEDULES:
        raise ConfigError(f"AECLStageSwitch: schedule must be one of {SCHEDULES}, got {schedule!r}")
    return e1 + (1 if schedule == "reference" else 0)


def stage_for_epoch(epoch: int, e1: int, e2: int, schedule: str = "paper") -> int:
    """Stage of the 0-based ``epoch``: 1 for the first ``stage1_epochs(e1, schedule)`` epochs, 2 for the
    next ``e2``, then 3.

    ``paper`` is Algorithm 1 with 1-based epochs (stage 1 while epoch ≤ E1). ``reference``: the reference
    code compares a 0-based epoch with ``<= E1`` and so runs one stage-1 epoch more.
    """
    if epoch < 0 or e1 < 0 or e2 < 0:
        raise ValueError(f"epoch, e1 and e2 must be >= 0, got epoch={epoch}, e1={e1}, e2={e2}")
    first = stage1_epochs(e1, schedule)
    if epoch < first:
        return 1
    return 2 if epoch < first + e2 else 3


def _check_epochs(e1, e2) -> None:
    for name, value in (("e1", e1), ("e2", e2)):
        if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < 0):
            raise ConfigError(f"AECLStageSwitch: {name} must be an integer >= 0 (epochs), got {value!r}")


class AECLStageSwitch(Callback):
    """Sets the module's stage at the start of every epoch and computes stage-2 pseudo-labels.

    Stage 1 for ``e1`` epochs (``schedule=reference``: ``e1 + 1``, as the reference code runs),
    stage 2 for ``e2`` epochs, stage 3 afterwards (``stage_for_epoch``). The pseudo-labels are KMeans
    clusters (``kmeans_seed``, ``kmeans_n_init``, ``kmeans_max_iter``, ``kmeans_tol``) of the encoder
    embeddings V⁰ of the whole training set, i.e. ``eval_step``'s ``embeddings`` over the datamodule's
    evaluation loader (shared with other callbacks through ``cached_eval_outputs``), computed at the
    start of EACH stage-2 epoch (``pseudo_labels=every_epoch``) or ONCE, at the start of stage 2, and
    kept through it (``once``: the reference code, whose KMeans after the last stage-1 epoch is the
    last one it keeps). Logs ``train/stage``.

    Needs on the module: ``set_stage(int)``, ``set_pseudo_labels(labels, epoch)``,
    ``pseudo_label_epoch`` (the epoch the current labels were computed for), ``num_clusters``,
    ``eval_step(batch) -> {"embeddings": ...}`` and, when ``e1``/``e2`` are not given here,
    attributes ``e1`` and ``e2`` (AECL takes them from ``method.e1``/``method.e2``). On the
    datamodule: ``eval_dataloader()`` with every training row once (batches carry ``index``).

    Resume: the stage and the pseudo-labels live in the module's buffers (checkpointed). A run
    resumed in the middle of a stage-2 epoch keeps the labels computed at that epoch's start
    (``pseudo_label_epoch`` matches), so it trains as the uninterrupted run did. Under DDP
    rank 0's KMeans labels are broadcast.
    """

    drives_aecl_stages = True  # the module warns when no callback with this flag is present

    def __init__(
        self, e1: int | None = None, e2: int | None = None, kmeans_seed: int = 0, kmeans_n_init: int = 10, *,
        kmeans_backend: str, kmeans_sample: int, schedule: str = "paper", pseudo_labels: str = "every_epoch",
        kmeans_max_iter: int | None = None, kmeans_tol: float | None = None, cluster_space: str = "embeddings",
        umap: dict | None = None,
    ):
        _check_epochs(e1, e2)
        if isinstance(kmeans_sample, bool) or not isinstance(kmeans_sample, int) or kmeans_sample < 0:
            raise ConfigError(f"AECLStageSwitch: kmeans_sample must be a whole number >= 0 (0: every row), "
                              f"got {kmeans_sample!r}")
        if kmeans_n_init < 1:
            raise ConfigError(f"AECLStageSwitch: kmeans_n_init must be >= 1, got {kmeans_n_init}")
        stage1_epochs(0, schedule)  # checks the name
        if pseudo_labels not in PSEUDO_LABELS:
            raise ConfigError(f"AECLStageSwitch: pseudo_labels must be one of {PSEUDO_LABELS}, got {pseudo_labels!r}")
        if kmeans_tol is not None and check_kmeans_backend(kmeans_backend) != "sklearn":
            raise ConfigError("AECLStageSwitch: kmeans_tol is scikit-learn's tolerance; set kmeans_backend=sklearn")
        self.schedule = schedule
        self.pseudo_labels = pseudo_labels
        self.kmeans_max_iter = kmeans_max_iter
        self.kmeans_tol = kmeans_tol
        self.e1 = e1
        self.e2 = e2
        self.kmeans_seed = kmeans_seed
        self.kmeans_n_init = kmeans_n_init
        self.kmeans_backend = check_kmeans_backend(kmeans_backend)
        self.kmeans_sample = kmeans_sample
        self.space = SpaceSettings.from_config(cluster_space, umap)  # where the pseudo-labels' KMeans clusters
        self._saved_schedule: dict | None = None

    def setup(self, trainer, pl_module, stage: str) -> None:
        missing = [name for name in MODULE_NEEDS if not hasattr(pl_module, name)]
        if missing:
            raise WrongMethodError(
                f"AECLStageSwitch needs {missing} on the LightningModule ({type(pl_module).__name__}); "
                "it drives lightning_modules.aecl.AECL: use it with method=aecl."
            )
        if self.e1 is None:
            self.e1 = int(getattr(pl_module, "e1"))
        if self.e2 is None:
            self.e2 = int(getattr(pl_module, "e2"))
        _check_epochs(self.e1, self.e2)

    # -- persistence: the schedule a checkpoint was trained with -------------------------------------
    def state_dict(self) -> dict:
        return {"e1": self.e1, "e2": self.e2, "schedule": self.schedule}

    def load_state_dict(self, state_dict: dict) -> None:
        self._saved_schedule = dict(state_dict)

    def on_train_start(self, trainer, pl_module) -> None:
        saved = self._saved_schedule
        if saved and (saved.get("e1"), saved.get("e2")) != (self.e1, self.e2):
            rank_zero_warn(
                f"AECL resumed with stage lengths e1={self.e1}, e2={self.e2}, but the checkpoint was trained "
                f"with e1={saved.get('e1')}, e2={saved.get('e2')}: the stages follow the new values."
            )

    # -- hooks ------------------------------------------------------------------------------------------
    def on_train_epoch_start(self, trainer, pl_module) -> None:
        epoch = trainer.current_epoch
        stage = stage_for_epoch(epoch, self.e1, self.e2, self.schedule)
        pl_module.set_stage(stage)
        labelled = int(pl_module.pseudo_label_epoch)
        first_stage2 = stage1_epochs(self.e1, self.schedule)
        stale = labelled != epoch if self.pseudo_labels == "every_epoch" else labelled < first_stage2
        if stage == 2 and stale:
            pl_module.set_pseudo_labels(self.kmeans_labels(trainer, pl_module), epoch)

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx) -> None:
        pl_module.log_number("train/stage", pl_module.stage, batch_size=1)

    def kmeans_labels(self, trainer, pl_module) -> torch.Tensor:
        """KMeans clusters [n] of the whole training set's embeddings, in row order (centres fitted on at most
        ``kmeans_sample`` of them, then every row assigned to its nearest centre; in a UMAP refined by its linear
        classifier, ``umap.refine=linear``, the classifier's clusters)."""
        embeddings = cached_eval_outputs(trainer, pl_module)["embeddings"]  # [n, d]
        if self.space.umap:
            labels = space_kmeans(
                embeddings.numpy(), pl_module.num_clusters, self.kmeans_seed, self.kmeans_n_init, self.kmeans_backend,
                self.kmeans_sample, self.space, max_iter=self.kmeans_max_iter, tol=self.kmeans_tol,
            ).labels_
        else:
            labels = kmeans_fit(
                embeddings.numpy(), pl_module.num_clusters, self.kmeans_seed, self.kmeans_n_init, self.kmeans_backend,
                max_iter=self.kmeans_max_iter, tol=self.kmeans_tol, sample=self.kmeans_sample,
            ).labels_
        labels = torch.as_tensor(labels, dtype=torch.long)  # [n]
        return trainer.strategy.broadcast(labels, src=0)
