"""AECL on the toy corpus: the SCCL toy overrides without SCCL's centroid callback, plus stages."""
from __future__ import annotations

from pathlib import Path

from tests.helpers import toy_overrides


def aecl_toy_overrides(csv: Path, e1: int = 1, e2: int = 1, epochs: int = 3, steps: int = -1) -> list[str]:
    """Tiny backbone, batch 12 (3 steps per epoch on the 36-row toy corpus), evaluation once per
    epoch, cheap KMeans."""
    dropped = (
        "method.callbacks.centroid_init",
        "trainer.max_steps",
        "batch_size",
        "dataset.callbacks.clustering_eval.every_n_steps",
    )
    base = [o for o in toy_overrides(csv) if not o.startswith(dropped)]
    return base + [
        "batch_size=12",
        "dataset.callbacks.clustering_eval.every_n_steps=3",
        "method=aecl",
        f"method.e1={e1}",
        f"method.e2={e2}",
        "method.callbacks.stage_switch.kmeans_n_init=2",
        f"trainer.max_epochs={epochs}",
        f"trainer.max_steps={steps}",
    ]
