"""What each cluster of a run is about: size, top words, representative texts, majority label.

    python tools.py describe --run <run folder> [--top-words 10] [--representatives 3] [--html]

writes ``<run>/clusters.md`` and ``<run>/clusters.json`` (a clustering run writes them itself at the
end of training; this command redoes them, e.g. with other settings), with ``--html`` also
``<run>/report.html`` (``evaluation.run_report.html``: the same clusters on an interactive map). Per cluster:

- size (empty clusters of the head are listed too);
- top words by class-based TF-IDF over the cluster's texts (``evaluation.run_report.ctfidf``, BERTopic's c-TF-IDF);
  a term is a word (English stop words removed), a character n-gram (``auto`` for scripts written
  without spaces) or a piece of the backbone's tokenizer (``--tokenizer``);
- the representative texts: the distinct texts nearest (Euclidean, as KMeans) the mean evaluation
  embedding of the cluster's texts (``embeddings/after.npy``; without it the run's encoder embeds the texts);
- with labels: the majority label and the purity (share of the cluster's texts that carry it).

``clusters.md`` describes the run's own clusters (the cluster head's for SCCL/AECL, KMeans
otherwise); ``clusters.json`` holds both partitions (``head`` and ``kmeans``) when the run has both,
so that predictions from KMeans centroids (``evaluation.model_io.predict --assign kmeans``, a
sentence-transformers export) have top words too.
"""
from __future__ import annotations

import json
import logging
from collections import Counter
from pathlib import Path
from typing import Sequence

import numpy as np

from evaluation.model_io import run_files
from evaluation.run_report.ctfidf import top_words
from textcore.errors import writing

log = logging.getLogger(__name__)


def representative_rows(embeddings: np.ndarray, rows: np.ndarray, texts: Sequence[str], count: int = 3) -> list[int]:
    """Up to ``count`` rows of ``rows`` whose embeddings are nearest the rows' mean, one per distinct text."""
    if len(rows) == 0:
        return []
    members = np.asarray(embeddings[rows], dtype=np.float32)  # [n, d] (the run's file is float16)
    distances = np.linalg.norm(members - members.mean(axis=0, keepdims=True), axis=1)  # [n]
    chosen, seen = [], set()
    for i in np.argsort(distances, kind="stable"):
        text = texts[rows[i]]
        if text not in seen:
            seen.add(text)
            chosen.append(int(rows[i]))
        if len(chosen) == count:
            break
    return chosen


def describe_clusters(
    texts: Sequence[str],
    clusters: Sequence[int],
    embeddings: np.ndarray,
    labels: Sequence | None = None,
    num_clusters: int | None = None,
    top_n: int = 10,
    representatives: int = 3,
    tokenizer: str = "auto",
    backbone: str | None = None,
) -> list[dict]:
    """One dict per cluster 0..K-1: ``cluster``, ``size``, ``top_words`` [[word, weight], ...],
    ``representatives`` [{"row", "text"}], and with labels ``majority_label`` and ``purity``."""
    clusters = np.asarray(clusters, dtype=np.int64)
    if len(texts) != len(clusters) or len(embeddings) != len(clusters):
        raise ValueError(f"{len(texts)} texts, {len(clusters)} cluster ids and {len(embeddings)} embeddings differ")
    k = int(num_clusters if num_clusters is not None else clusters.max() + 1)
    words = top_words(texts, clusters, k, top_n, tokenizer=tokenizer, backbone=backbone)
    out = []
    for c in range(k):
        rows = np.flatnonzero(clusters == c)
        entry = {
            "cluster": c,
            "size": int(len(rows)),
            "top_words": [[w, round(s, 5)] for w, s in words[c]],
            "representatives": [{"row": r, "text": texts[r]} for r in representative_rows(
                embeddings, rows, texts, representatives)],
        }
        if labels is not None:
            counts = Counter(str(labels[r]) for r in rows)
            label, hits = counts.most_common(1)[0] if counts else (None, 0)
            entry["majority_label"] = label
            entry["purity"] = round(hits / len(rows), 4) if len(rows) else None
        out.append(entry)
    return out


def term_text(terms: str, backbone: str | None) -> str:
    """What a c-TF-IDF term is, in words, for a resolved tokenizer setting."""
    if terms.startswith("char:"):
        lo, hi = terms[5:].split("-")
        return f"character {lo}-grams within words" if lo == hi else \
            f"character n-grams of {lo} to {hi} characters within words"
    if terms == "backbone":
        return f"pieces of the {backbone} tokenizer"
    return "words of 2+ letters, English stop words removed"


def cluster_report(run_dir: str | Path, top_n: int = 10, representatives: int = 3, embeddings=None,
                   tokenizer: str = "auto", predictions: run_files.RunPredictions | None = None) -> dict:
    """The descriptions of every partition of a run (what ``clusters.json`` holds), without writing them.

    ``tokenizer``: what a c-TF-IDF term is (``evaluation.run_report.ctfidf.TOKENIZERS``; ``backbone`` uses the run's
    tokenizer, ``auto`` picks character n-grams for scripts written without spaces).
    """
    from evaluation.run_report.ctfidf import resolve_tokenizer

    run_dir = Path(run_dir)
    if predictions is None:  # the end of a run passes what it wrote: predictions.csv is not read back
        predictions = run_files.load_predictions(run_dir)
    cfg = run_files.load_config(run_dir)
    backbone = run_files.config_value(cfg, "dataset.tokenizer") or run_files.config_value(cfg, "backbone.name")
    terms = resolve_tokenizer(tokenizer, predictions.texts)
    if embeddings is None:
        embeddings = run_files.run_embeddings(run_dir, predictions.texts)
    k = run_files.num_clusters(run_dir, predictions)
    return {
        "run": str(run_dir),
        "title": run_files.run_title(run_dir),
        "num_texts": len(predictions.texts),
        "num_clusters": k,
        "primary": predictions.primary,
        "top_words": "c-TF-IDF (BERTopic) over each cluster's texts; " + term_text(terms, backbone),
        "tokenizer": terms,
        "representatives": "distinct texts nearest the mean evaluation embedding of the cluster (Euclidean)",
        "partitions": {
            name: describe_clusters(predictions.texts, clusters, embeddings, predictions.labels, k, top_n,
                                    representatives, terms, backbone)
            for name, clusters in predictions.partitions.items()
        },
    }


def describe_run(run_dir: str | Path, top_n: int = 10, representatives: int = 3, embeddings=None,
                 tokenizer: str = "auto", predictions: run_files.RunPredictions | None = None) -> dict:
    """Describe every partition of a run (``cluster_report``) and write ``clusters.md`` / ``clusters.json``;
    returns the json."""
    run_dir = Path(run_dir)
    report = cluster_report(run_dir, top_n, representatives, embeddings, tokenizer, predictions)
    with writing(run_dir / run_files.CLUSTERS_JSON):
        (run_dir / run_files.CLUSTERS_JSON).write_text(json.dumps(report, indent=2, ensure_ascii=False),
                                                       encoding="utf-8")
    with writing(run_dir / run_files.CLUSTERS_MD):
        (run_dir / run_files.CLUSTERS_MD).write_text(markdown(report), encoding="utf-8")
    return report


def _cell(text: str, limit: int = 160) -> str:
    text = " ".join(str(text).split())
    text = text if len(text) <= limit else text[: limit - 1] + "…"
    return text.replace("|", "\\|")


DEFAULT_TOP_WORDS = "c-TF-IDF (BERTopic) over each cluster's texts; words of 2+ letters, English stop words removed"


def markdown(report: dict) -> str:
    """``clusters.md``: a summary table, then each cluster's top words and representative texts."""
    name = report["primary"]
    clusters = report["partitions"][name]
    source = "the cluster head (head_cluster in predictions.csv)" if name == "head" else \
        "KMeans on the final embeddings (kmeans_cluster in predictions.csv)"
    labelled = bool(clusters) and "majority_label" in clusters[0]
    lines = [
        f"# Clusters: {report['title']}",
        "",
        f"{report['num_texts']} texts in {report['num_clusters']} clusters of {source}. Top words: "
        f"{report.get('top_words') or DEFAULT_TOP_WORDS}; representative texts: "
        "nearest the cluster's mean embedding." + (" Purity: share of the cluster's texts with its majority "
                                                   "label." if labelled else ""),
        "",
        "| cluster | size | " + ("majority label | purity | " if labelled else "") + "top words |",
        "|---:|---:|" + ("---|---:|" if labelled else "") + "---|",
    ]
    for c in clusters:
        words = ", ".join(w for w, _ in c["top_words"])
        cells = [str(c["cluster"]), str(c["size"])]
        if labelled:
            purity = "-" if c["purity"] is None else f"{100 * c['purity']:.1f}%"
            cells += [_cell(c["majority_label"] or "-", 40), purity]
        lines.append("| " + " | ".join(cells + [_cell(words, 200) or "-"]) + " |")
    for c in clusters:
        lines += ["", f"## Cluster {c['cluster']} ({c['size']} texts)", ""]
        if not c["size"]:
            lines.append("Empty: no text is assigned to this cluster.")
            continue
        if labelled:
            lines += [f"Majority label: {c['majority_label']} ({100 * c['purity']:.1f}%)", ""]
        lines += [f"Top words: {', '.join(w for w, _ in c['top_words']) or '-'}", ""]
        lines += [f"- {_cell(r['text'], 300)}" for r in c["representatives"]]
    return "\n".join(lines) + "\n"


def write_descriptions(*, run: Path, top_words: int, representatives: int, tokenizer: str, html: bool,
                       projection: str | None, max_points: int | None, trust_checkpoint: bool) -> dict:
    """``python tools.py describe`` (its options, ctclust.commands.describe): the run's cluster descriptions, and
    with ``html`` its page (the map's ``projection`` and ``max_points`` default to the run's report settings)."""
    embeddings = None
    if html or trust_checkpoint:  # read once, for the descriptions and the map
        embeddings = run_files.run_embeddings(run, run_files.load_predictions(run).texts,
                                              trust_checkpoint)
    report = describe_run(run, top_words, representatives, embeddings=embeddings,
                          tokenizer=tokenizer)
    print(f"wrote {run / run_files.CLUSTERS_MD} and {run / run_files.CLUSTERS_JSON}")
    if html:
        from evaluation.run_report.html import write_run_page

        cfg = run_files.load_config(run)
        setting = run_files.config_value(cfg, "callbacks.report.html_max_points")
        setting = setting if setting is not None else run_files.config_value(cfg, "callbacks.report.max_points")
        max_points = max_points if max_points is not None else (3000 if setting is None else int(setting))
        projection = projection or run_files.config_value(cfg, "callbacks.report.projection") or "tsne"
        seed = run_files.config_value(cfg, "callbacks.report.seed")
        path = write_run_page(run, report, embeddings, projection=projection, max_points=max_points,
                              seed=int(seed) if isinstance(seed, int) else 0)
        print(f"wrote {path}")
    return report

