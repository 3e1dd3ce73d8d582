"""Human-readable summaries of a run's results.json."""
from __future__ import annotations


def _fmt(value) -> str:
    return "-" if value is None else f"{100 * value:.2f}"


def summary_rows(results: dict) -> list[dict]:
    """Rows of the before/after table: KMeans before, KMeans after, the cluster head after."""
    clustering = results.get("clustering") or {}
    rows = []
    for what, entry, prefix in [
        ("KMeans on embeddings, before training", clustering.get("before"), "kmeans"),
        ("KMeans on embeddings, after training", clustering.get("final"), "kmeans"),
        ("cluster head, after training", clustering.get("final"), "head"),
        (f"KMeans, best step ({clustering.get('best_step')}, chosen with labels)", clustering.get("best"), "kmeans"),
    ]:
        if not entry or f"{prefix}_acc" not in entry:
            continue
        scores = {m.upper(): _fmt(entry.get(f"{prefix}_{m}")) for m in ("acc", "nmi", "ari", "ami")}
        rows.append({"what": what, **scores})
    return rows
