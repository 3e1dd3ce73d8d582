"""3. Checks that need the data (after ``datamodule.setup``), before the model and its backbone are built."""
from __future__ import annotations

import logging
import math

from omegaconf import DictConfig

from lightning_modules.shared.step_budget import step_budget
from textcore.data_kinds import SENTENCES, SHORT_TEXT
from textcore.errors import ConfigError
from validation.checkpoint import CheckpointError
from validation.lookup import chosen_name, data_kind_of, select, target_of
from validation.settings import devices_count

log = logging.getLogger(__name__)


def planned_steps(cfg: DictConfig, texts: int) -> tuple[int, int] | None:
    """(optimizer steps, texts per step) of a training on ``texts`` texts: ``trainer.max_steps``, or fewer when
    ``trainer.max_epochs`` ends it first (``lightning_modules.shared.step_budget``); None when the budget is set in
    epochs alone (``max_steps`` <= 0) or the number of processes is decided at run time."""
    steps = select(cfg, "trainer.max_steps")
    batch = select(cfg, "batch_size")
    devices = devices_count(select(cfg, "trainer.devices", 1))
    if not isinstance(steps, int) or steps <= 0 or not batch or devices is None or texts <= 0:
        return None
    per_step = int(batch) * devices * int(select(cfg, "trainer.num_nodes", 1) or 1)
    return step_budget(steps, select(cfg, "trainer.max_epochs", -1), math.ceil(texts / per_step)), per_step


def training_budget(cfg: DictConfig, texts: int) -> str | None:
    """What share of a corpus of ``texts`` texts the configured training draws, in one line (None when the budget is
    set in epochs or the number of processes is decided at run time)."""
    planned = planned_steps(cfg, texts)
    if planned is None:
        return None
    steps, per_step = planned
    max_steps, max_epochs = select(cfg, "trainer.max_steps"), select(cfg, "trainer.max_epochs", -1)
    drawn = max_epochs * texts if steps < max_steps else steps * per_step  # each epoch draws every text once
    epochs = drawn / texts
    line = (f"training budget: {steps} steps x {per_step} texts = {drawn:,} texts drawn, "
            f"{epochs:.2f} epochs of the {texts:,} texts")
    if steps < max_steps:  # a small corpus: the epochs end it; a raised max_steps alone would change nothing
        line += (f" (trainer.max_epochs={max_epochs} ends it before trainer.max_steps={max_steps}; "
                 "trainer.max_epochs=-1 trains every step)")
    elif epochs < 1:
        line += (f" ({100 * epochs:.1f} % of the corpus is seen once at most); trainer.max_steps="
                 f"{math.ceil(texts / per_step)} makes one epoch")
    return line


def check_data(cfg: DictConfig, datamodule, checkpoint_hparams: dict | None = None) -> None:
    """Checks that need the data (after ``datamodule.setup``), before the model is built."""
    texts = getattr(datamodule, "texts", None) if data_kind_of(target_of(cfg, "dataset")) == SHORT_TEXT else None
    path = getattr(datamodule, "path", None)
    if texts is not None:
        budget = training_budget(cfg, len(texts))
        if budget is not None:
            log.info(budget)
        batch = getattr(datamodule, "batch_size", None)
        if len(texts) < 2:
            raise ConfigError(f"'{path}' has {len(texts)} usable text(s); contrastive training needs at least 2. "
                              "Use a larger file.")
        if batch and getattr(datamodule, "drop_last", False) and len(texts) < batch:
            raise ConfigError(
                f"'{path}' has {len(texts)} texts, fewer than batch_size={batch}, and dataset.drop_last=true drops "
                f"the only, incomplete batch: no training step would run. Set batch_size <= {len(texts)} or "
                "dataset.drop_last=false."
            )
    dataset = getattr(datamodule, "dataset", None)
    if data_kind_of(target_of(cfg, "dataset")) == SENTENCES and dataset is not None and hasattr(dataset, "count_texts"):
        # one pass over the file now (cached for the loader's length): an undecodable byte anywhere in it
        # stops the run here, before the backbone is loaded, instead of in the middle of an epoch
        if dataset.count_texts() < 2:
            raise ConfigError(f"'{path}' has fewer than 2 sentences; contrastive training needs at least 2. "
                              "Point dataset.path at a larger file.")
    train_set = getattr(datamodule, "train_set", None)
    if train_set is not None and hasattr(train_set, "__len__") and getattr(datamodule, "drop_last", False):
        batch = getattr(datamodule, "batch_size", None)
        if batch and len(train_set) < batch:
            raise ConfigError(
                f"'{path}' has {len(train_set)} usable pairs, fewer than batch_size={batch}, and "
                "dataset.drop_last=true: no training step would run. Lower batch_size or set dataset.drop_last=false."
            )
    if checkpoint_hparams and "num_clusters" in checkpoint_hparams:
        theirs = checkpoint_hparams["num_clusters"]
        ours = select(cfg, "method.num_clusters")
        if ours is None or ours == "auto":
            ours = getattr(datamodule, "num_clusters", None)
        if ours is not None and theirs is not None and int(theirs) != int(ours):
            raise CheckpointError(
                f"ckpt_path={select(cfg, 'ckpt_path')} has K={theirs} clusters, but this run has K={ours} "
                f"(method.num_clusters / dataset.num_clusters of dataset={chosen_name(cfg, 'dataset')}). Resume with "
                f"the dataset and K it was trained with (e.g. `dataset.num_clusters={theirs}`), or drop ckpt_path."
            )
