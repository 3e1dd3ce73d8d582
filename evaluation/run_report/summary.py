"""Human-readable summaries of a run's results.json."""
from __future__ import annotations

import math

from evaluation.clustering import catalogue


def _fmt(value) -> str:
    return "-" if value is None else f"{100 * value:.2f}"


def _fmt_free(metric: catalogue.Metric, value) -> str:
    if value is None or not math.isfinite(value):
        return "-"
    return f"{100 * value:.1f}" if metric.percent else f"{value:.3f}"


def space_dims(clustering: dict) -> int | None:
    return ((clustering.get("protocol") or {}).get("cluster_space") or {}).get("n_components")


def summary_rows(results: dict) -> list[dict]:
    """Rows of the before/after table: KMeans before, KMeans after, the cluster head after, the best step.

    With labels: the catalogue's metrics with labels (ACC, NMI, ARI, AMI). Without: its label-free criteria that
    the table shows (``in_summary``: silhouette, Davies-Bouldin, size entropy, changed).
    """
    clustering = results.get("clustering") or {}
    monitor = clustering.get("best_monitor") or "kmeans_acc"
    how = "chosen with labels" if clustering.get("best_selected_with_labels") else "chosen without labels"
    # where KMeans clustered (cluster_space): the embeddings, or their UMAP
    record = (clustering.get("protocol") or {}).get("cluster_space") or {}
    space = record.get("space", "embeddings")
    fits = int(record.get("fits") or 1)  # a run from before several fits has no key: one
    maps = f"{fits} UMAPs ({space_dims(clustering)}-d each, side by side)" if fits > 1 else \
        f"a UMAP ({space_dims(clustering)}-d)"
    where = "on embeddings" if space == "embeddings" else f"in {maps} of the embeddings"
    if space != "embeddings" and record.get("refine") == "linear":  # a run from before the refinement has no key
        where += ", refined linearly"
    entries = [
        (f"KMeans {where}, before training", clustering.get("before"), "kmeans"),
        (f"KMeans {where}, after training", clustering.get("final"), "kmeans"),
        ("cluster head, after training", clustering.get("final"), "head"),
        (f"KMeans, best step ({clustering.get('best_step')}, {how}: {monitor})", clustering.get("best"), "kmeans"),
    ]
    labelled = any(entry and "kmeans_acc" in entry for _, entry, _ in entries)
    rows = []
    for what, entry, prefix in entries:
        if labelled:
            if not entry or f"{prefix}_acc" not in entry:
                continue
            scores = {m.title: _fmt(entry.get(f"{prefix}_{m.name}")) for m in catalogue.with_labels()}
        else:
            if not entry or f"{prefix}_silhouette" not in entry:
                continue
            scores = {m.title: _fmt_free(m, entry.get(f"{prefix}_{m.name}"))
                      for m in catalogue.label_free() if m.in_summary}
        rows.append({"what": what, **scores})
    return rows
