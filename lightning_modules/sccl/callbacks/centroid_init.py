"""KMeans initialisation of cluster centroids before the first training step (SCCL §3.2)."""
from __future__ import annotations

import numpy as np
import torch
from lightning.pytorch.callbacks import Callback

from errors import ConfigError
from lightning_modules.shared.eval_outputs import cached_eval_outputs
from lightning_modules.shared.kmeans import check_kmeans_backend, kmeans_fit


def kmeans_init(
    embeddings: torch.Tensor | np.ndarray, num_clusters: int, seed: int = 0, n_init: int = 10, *, backend: str,
) -> torch.Tensor:
    """KMeans centres [K, d] of ``embeddings`` [N, d], deterministic for a given seed (``kmeans_fit``'s backend)."""
    data = embeddings.numpy() if isinstance(embeddings, torch.Tensor) else np.asarray(embeddings)
    centres = kmeans_fit(data, num_clusters, seed=seed, n_init=n_init, backend=backend).cluster_centers_
    return torch.as_tensor(centres, dtype=torch.float32)


class KMeansCentroidInit(Callback):
    """Fills the module's centroids with KMeans centres of the whole training set.

    Needs on the module: ``needs_centroid_init`` (bool), ``set_centroids(tensor)``, ``num_clusters``
    and ``eval_step(batch) -> {"embeddings": ...}``; on the datamodule: ``eval_dataloader()``.
    Runs at train start, and at the start of any later step, when the module says its centroids
    need initialising (SCCL's sequential variant asks at its switch to clustering), so a resumed
    run keeps the centroids it saved. Under DDP the centres of rank 0 are broadcast.
    """

    def __init__(self, seed: int = 0, n_init: int = 10, *, kmeans_backend: str):
        if n_init < 1:
            raise ConfigError(f"method.callbacks.centroid_init.n_init must be >= 1, got {n_init}")
        self.seed = seed
        self.n_init = n_init
        self.kmeans_backend = check_kmeans_backend(kmeans_backend)

    def on_train_start(self, trainer, pl_module) -> None:
        self._initialise_if_needed(trainer, pl_module)

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx) -> None:
        self._initialise_if_needed(trainer, pl_module)

    def _initialise_if_needed(self, trainer, pl_module) -> None:
        if not getattr(pl_module, "needs_centroid_init", False):
            return
        embeddings = cached_eval_outputs(trainer, pl_module)["embeddings"]
        centres = kmeans_init(embeddings, pl_module.num_clusters, self.seed, self.n_init, backend=self.kmeans_backend)
        centres = trainer.strategy.broadcast(centres, src=0)
        pl_module.set_centroids(centres)
