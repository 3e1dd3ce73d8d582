"""KMeans initialisation of cluster centroids before the first training step (SCCL §3.2)."""
from __future__ import annotations

import torch
from lightning.pytorch.callbacks import Callback

from lightning_modules.shared.eval_outputs import cached_eval_outputs, outputs_kmeans
from textcore.cluster_space import SpaceSettings
from textcore.errors import ConfigError
from textcore.kmeans import check_kmeans_backend, sample_rows


class KMeansCentroidInit(Callback):
    """Fills the module's centroids with KMeans centres of the training set's embeddings: every text, or for a
    corpus larger than ``sample`` a seeded sample of ``sample`` texts (conf ``eval_sample``; the same rows as the
    clustering evaluator's "before" evaluation, whose encoder pass it shares), KMeans fitted on at most
    ``kmeans_sample`` of them.

    Needs on the module: ``needs_centroid_init`` (bool), ``set_centroids(tensor)``, ``num_clusters``
    and ``eval_step(batch) -> {"embeddings": ...}``; on the datamodule: ``eval_dataloader()``.
    Runs at train start, and at the start of any later step, when the module says its centroids
    need initialising (SCCL's sequential variant asks at its switch to clustering), so a resumed
    run keeps the centroids it saved. Under DDP the centres of rank 0 are broadcast.
    """

    def __init__(self, seed: int = 0, n_init: int = 10, *, kmeans_backend: str, sample: int, kmeans_sample: int,
                 cluster_space: str = "embeddings", umap: dict | None = None):
        if n_init < 1:
            raise ConfigError(f"method.callbacks.centroid_init.n_init must be >= 1, got {n_init}")
        for name, value in (("sample", sample), ("kmeans_sample", kmeans_sample)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ConfigError(f"method.callbacks.centroid_init.{name}={value!r}: a whole number >= 0 (0: all)")
        self.seed = seed
        self.n_init = n_init
        self.kmeans_backend = check_kmeans_backend(kmeans_backend)
        self.sample = sample
        self.kmeans_sample = kmeans_sample
        # cluster_space=umap: KMeans on the UMAP of the embeddings; each centroid is then its cluster's mean embedding
        self.space = SpaceSettings.from_config(cluster_space, umap)

    def on_train_start(self, trainer, pl_module) -> None:
        self._initialise_if_needed(trainer, pl_module)

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx) -> None:
        self._initialise_if_needed(trainer, pl_module)

    def _initialise_if_needed(self, trainer, pl_module) -> None:
        if not getattr(pl_module, "needs_centroid_init", False):
            return
        rows = sample_rows(len(trainer.datamodule.texts), self.sample, self.seed)
        outputs = cached_eval_outputs(trainer, pl_module, rows)  # the pass (and KMeans) of the "before" evaluation
        fitted = outputs_kmeans(outputs, pl_module.num_clusters, self.seed, self.n_init, self.kmeans_backend,
                                self.kmeans_sample, self.space)
        centres = torch.as_tensor(getattr(fitted, "embedding_centers_", fitted.cluster_centers_), dtype=torch.float32)
        centres = trainer.strategy.broadcast(centres, src=0)
        pl_module.set_centroids(centres)
