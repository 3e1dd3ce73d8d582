"""What report.html shows, as plain JSON-able values: the map's sample, each cluster, the summary table."""
from __future__ import annotations

import math
from typing import Sequence

import numpy as np

from evaluation.run_report.plots import PROJECTIONS, cluster_colour_index, palette, project_2d, subsample
from evaluation.run_report.summary import summary_rows

PROJECTION_NAMES = {"tsne": "t-SNE", "umap": "UMAP", "pca": "PCA"}
TEXT_LIMIT = 280  # characters of a text kept for the hover box and the cluster cards
SILHOUETTE_SAMPLE = 3000  # silhouette is quadratic in the number of texts


def hex_colour(rgba) -> str:
    return "#" + "".join(f"{round(255 * float(v)):02x}" for v in rgba[:3])


def short_text(text, limit: int = TEXT_LIMIT) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def map_points(embeddings: np.ndarray, clusters: np.ndarray, texts: Sequence[str], labels: np.ndarray | None,
               class_names: list[str], projection: str, max_points: int, seed: int,
               rows: np.ndarray | None = None) -> dict:
    """The sampled texts (``rows``, default a seeded sample of ``max_points``) with 2-D coordinates scaled into
    [0, 1] (the map keeps its aspect ratio)."""
    if projection not in PROJECTIONS:
        raise ValueError(f"projection must be one of {PROJECTIONS}, got '{projection}'")
    rows = subsample(len(clusters), max_points, seed) if rows is None else rows
    xy = np.asarray(project_2d(np.asarray(embeddings[rows], dtype=np.float32), projection, seed),
                    dtype=np.float64)  # [n, 2]
    if len(xy):
        xy = xy - xy.min(axis=0)
        xy = xy / max(float(xy.max()), 1e-12)
    points = {
        "x": [round(float(v), 4) for v in xy[:, 0]] if len(xy) else [],
        "y": [round(float(v), 4) for v in xy[:, 1]] if len(xy) else [],
        "cluster": [int(c) for c in clusters[rows]],
        "row": [int(r) for r in rows],
        "text": [short_text(texts[r]) for r in rows],
    }
    if labels is not None:
        index = {name: i for i, name in enumerate(class_names)}
        points["label"] = [index[str(labels[r])] for r in rows]
    return points


def cluster_scores(embeddings: np.ndarray, clusters: np.ndarray, num_clusters: int, seed: int) -> list[dict]:
    """Per cluster, scores that need no labels: mean silhouette of its texts (cosine, on a seeded sample of
    at most ``SILHOUETTE_SAMPLE`` texts of the run) and cohesion (mean cosine of its texts to their mean)."""
    from sklearn.metrics import silhouette_samples

    def unit(x) -> np.ndarray:
        x = np.asarray(x, dtype=np.float32)
        return x / np.maximum(np.linalg.norm(x, axis=1, keepdims=True), 1e-12)

    rows = subsample(len(clusters), SILHOUETTE_SAMPLE, seed)
    sampled = clusters[rows]
    silhouettes = np.full(len(rows), np.nan)
    if 1 < len(np.unique(sampled)) < len(rows):
        silhouettes = silhouette_samples(unit(embeddings[rows]), sampled, metric="cosine")
    out = []
    for c in range(num_clusters):  # one cluster's rows at a time: the embeddings may be a file of a million rows
        members = unit(embeddings[np.flatnonzero(clusters == c)])
        mine = silhouettes[sampled == c]
        entry = {"silhouette": _rounded(float(mine.mean())) if len(mine) else None, "cohesion": None}
        if len(members):
            centre = members.mean(axis=0)
            centre /= max(float(np.linalg.norm(centre)), 1e-12)
            entry["cohesion"] = _rounded(float((members @ centre).mean()))
        out.append(entry)
    return out


def _rounded(value: float) -> float | None:
    return round(value, 4) if math.isfinite(value) else None


def cluster_cards(report: dict, partition: str, scores: list[dict], colours: list[str], shown: np.ndarray,
                  num_texts: int) -> list[dict]:
    """One entry per cluster of ``report`` (clusters.json's layout): size, terms, representatives, scores."""
    cards = []
    for entry, score in zip(report["partitions"][partition], scores):
        c = int(entry["cluster"])
        card = {
            "cluster": c,
            "size": int(entry["size"]),
            "share": round(entry["size"] / max(num_texts, 1), 4),
            "on_map": int(shown[c]) if c < len(shown) else 0,
            "colour": colours[c],
            "terms": [[str(w), float(s)] for w, s in entry["top_words"]],
            "representatives": [short_text(r["text"], 400) for r in entry["representatives"]],
            **score,
        }
        if "majority_label" in entry:
            card["majority_label"] = entry["majority_label"]
            card["purity"] = entry["purity"]
        cards.append(card)
    return cards


def summary_table(results: dict | None) -> dict:
    """The run's numbers as the end-of-run table prints them (``evaluation.run_report.summary.summary_rows``); a run
    without clustering numbers (STS) gets the numeric entries of its results, one row each."""
    if not results:
        return {"columns": [], "rows": []}
    rows = summary_rows(results)
    if rows:
        return {"columns": list(rows[0]), "rows": [[str(v) for v in row.values()] for row in rows]}
    flat = []
    for key, value in results.items():
        if isinstance(value, dict):
            flat += [(f"{key}.{k}", v) for k, v in value.items() if _number(v)]
        elif _number(value) and key not in ("seed", "torch_threads"):
            flat.append((key, value))
    return {"columns": ["what", "value"], "rows": [[k, f"{v:.4g}"] for k, v in flat[:60]]}


def _number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def page_data(texts: Sequence[str], clusters, embeddings: np.ndarray, report: dict, *, labels=None,
              partition: str | None = None, projection: str = "tsne", max_points: int = 3000, seed: int = 0,
              results: dict | None = None, title: str = "", map_rows: np.ndarray | None = None) -> dict:
    """Everything the page's script reads. ``report``: the cluster descriptions (clusters.json's layout,
    ``evaluation.run_report.describe``); ``clusters``/``labels``/``texts``/``embeddings``: row-aligned, every text;
    ``map_rows``: the texts of the map (default: a seeded sample of ``max_points``)."""
    clusters = np.asarray(clusters, dtype=np.int64)
    if not len(texts) == len(clusters) == len(embeddings):
        raise ValueError(f"{len(texts)} texts, {len(clusters)} cluster ids and {len(embeddings)} embeddings differ")
    partition = partition or report["primary"]
    k = len(report["partitions"][partition])
    labels = None if labels is None else np.asarray(labels).astype(str)
    class_names = sorted(set(labels.tolist())) if labels is not None else []
    rgba = palette(max(len(class_names), 1) + k) if labels is not None else palette(max(k, 1))
    # with labels each cluster takes the colour of the class it is matched to, as in plots/embeddings_*.png
    index = cluster_colour_index(labels, clusters, k) if labels is not None else {c: c for c in range(k)}
    colours = [hex_colour(rgba[index.get(c, c) % len(rgba)]) for c in range(k)]
    points = map_points(embeddings, clusters, texts, labels, class_names, projection, max_points, seed, map_rows)
    shown = np.bincount(np.asarray(points["cluster"], dtype=np.int64), minlength=k)
    return {
        "title": title,
        "num_texts": len(texts),
        "num_shown": len(points["x"]),
        "num_clusters": k,
        "partition": partition,
        "projection": PROJECTION_NAMES[projection],
        "terms": report.get("top_words", "c-TF-IDF terms"),
        "representatives": report.get("representatives", ""),
        "classes": class_names,
        "class_colours": [hex_colour(rgba[i]) for i in range(len(class_names))],
        "clusters": cluster_cards(report, partition, cluster_scores(embeddings, clusters, k, seed), colours,
                                  shown, len(texts)),
        "points": points,
        "summary": summary_table(results),
    }
