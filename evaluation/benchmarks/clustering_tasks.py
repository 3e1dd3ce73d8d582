"""The short-text clustering benchmarks and their protocol (PairSupCon Table 1): which sets, read from
their Hydra dataset configs, embedded once and clustered with KMeans over seeds; for ``evaluate_model``,
the end-of-training evaluation (``callbacks.evaluation.final_eval``), ``aggregate`` and the benchmarks.

A dataset whose file is absent is skipped with a note.
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable, Sequence

import numpy as np

from datamodules.download.catalogue import data_root
from evaluation.clustering import catalogue
from textcore.checkout import CONF
from textcore.errors import ConfigError, MissingFileError

CONF_DATASETS = CONF / "dataset"
# the data folder of `python tools.py download` ($PROJECT_DATA_DIR, else the repository's data/)
DATA = data_root()
# PairSupCon Table 1 order and column names
BENCHMARKS = (
    "agnews",
    "searchsnippets",
    "stackoverflow",
    "biomedical",
    "tweet",
    "googlenews_ts",
    "googlenews_s",
    "googlenews_t",
)
SHORT_NAMES = {
    "agnews": "AG",
    "searchsnippets": "SS",
    "stackoverflow": "SO",
    "biomedical": "Bio",
    "tweet": "Tweet",
    "googlenews_ts": "G-TS",
    "googlenews_s": "G-S",
    "googlenews_t": "G-T",
}
# clustering protocols: the papers' ways of turning a model into cluster assignments
CLUSTERING_PROTOCOLS = {
    "pairsupcon": "PairSupCon protocol (Table 1): the model's evaluation pooling, 32 tokens, KMeans seeds 0..S-1",
    "clusterns": "ClusterNS Table 6 protocol: the raw [CLS] state, 128 tokens, one scikit-learn KMeans per set "
                 "(seed 0, 10 restarts; the authors' cluster_eval.py left the seed unset)",
}
Encode = Callable[[list[str]], np.ndarray]


@dataclass
class ClusteringSet:
    """One clustering benchmark: where its texts are and how many clusters KMeans gets."""

    name: str
    path: Path
    text_column: str
    label_column: str
    num_clusters: int | None  # None: the number of distinct labels
    encoding: str = "utf-8"  # the file's text encoding (dataset.encoding, or --encoding)


def dataset_config(name: str, conf_dir: Path = CONF_DATASETS):
    """``conf/dataset/<name>.yaml`` merged over the configs in its ``defaults`` list, unresolved.

    Read with OmegaConf rather than Hydra's compose so that it also works inside a running
    Hydra application (the end-of-training callback).
    """
    from omegaconf import OmegaConf

    path = conf_dir / f"{name}.yaml"
    if not path.is_file():
        known = sorted(p.stem for p in conf_dir.glob("*.yaml"))
        raise MissingFileError(f"No dataset config '{path}'; known datasets: {known}.")
    cfg = OmegaConf.load(path)
    merged = OmegaConf.create()
    for parent in cfg.pop("defaults", []) or []:
        if isinstance(parent, str) and parent != "_self_":
            merged = OmegaConf.merge(merged, dataset_config(parent, conf_dir))
    return OmegaConf.merge(merged, cfg)


def clustering_set(
    name: str, data_dir: str | Path, conf_dir: Path = CONF_DATASETS, encoding: str | None = None
) -> ClusteringSet:
    cfg = dataset_config(name, conf_dir)
    for key in ("file", "text_column", "num_clusters"):
        if key not in cfg:
            raise ConfigError(f"{conf_dir / (name + '.yaml')}: missing key '{key}' needed for clustering evaluation.")
    return ClusteringSet(
        name=name,
        path=Path(data_dir) / cfg.file,
        text_column=cfg.text_column,
        label_column=cfg.get("label_column") or "label",
        num_clusters=cfg.num_clusters,
        encoding=encoding or cfg.get("encoding") or "utf-8",
    )


def clustering_sets(
    data_dir: str | Path, names: Iterable[str] = BENCHMARKS, conf_dir: Path = CONF_DATASETS,
    encoding: str | None = None,
) -> list[ClusteringSet]:
    return [clustering_set(name, data_dir, conf_dir, encoding) for name in names]


def evaluate_clustering(
    encode: Encode,
    sets: Sequence[ClusteringSet],
    seeds: Sequence[int] = tuple(range(10)),
    log: Callable[[str], None] | None = None,
    *,
    kmeans_backend: str,
    kmeans_n_init: int = 10,
) -> dict:
    """KMeans with each seed on each set's embeddings; mean and std of ACC/NMI/ARI/AMI (x1).

    ``kmeans_backend`` (``textcore.kmeans.KMEANS_BACKENDS``) and
    ``kmeans_n_init`` (restarts per seed) go to ``textcore.kmeans.kmeans_fit``.

    Returns ``{"datasets": {name: {acc, acc_std, nmi, nmi_std, ari, ..., n, k, seconds}},
    "avg": {acc, nmi}, "avg_over": [...], "skipped": {name: reason}, "seeds": [...]}``.
    """
    from datamodules.short_text_corpus import load_corpus
    from evaluation.clustering.metrics import kmeans_scores
    from textcore.kmeans import check_kmeans_backend

    backend = check_kmeans_backend(kmeans_backend)
    kmeans = {"backend": backend, "n_init": kmeans_n_init}
    out: dict = {"datasets": {}, "skipped": {}, "seeds": list(seeds), "kmeans": kmeans}
    for entry in sets:
        if not entry.path.is_file():
            out["skipped"][entry.name] = f"{entry.path} not found"
            if log:
                log(f"clustering: {entry.name} skipped ({entry.path} not found)")
            continue
        start = time.perf_counter()
        corpus = load_corpus(entry.path, entry.text_column, entry.label_column, encoding=entry.encoding)
        if corpus.labels is None:
            raise ConfigError(
                f"{entry.path}: no label column '{entry.label_column}'; clustering evaluation needs labels."
            )
        k = entry.num_clusters or len(np.unique(corpus.labels))
        embeddings = encode(corpus.texts)  # [n, d]; a sparse [n, V] for the bag-of-words baselines
        sparse_rows = hasattr(embeddings, "tocsr")
        if not sparse_rows:
            embeddings = np.asarray(embeddings, dtype=np.float32)
        embed_seconds = time.perf_counter() - start
        if embeddings.shape[0] != len(corpus.texts):
            raise ValueError(
                f"encode returned {embeddings.shape[0]} rows for {len(corpus.texts)} texts of {entry.path}"
            )
        if sparse_rows:
            from evaluation.clustering.metrics import sparse_kmeans_scores

            out["kmeans"] = {"backend": "sklearn (sparse)", "n_init": kmeans_n_init}
            scores = sparse_kmeans_scores(embeddings, corpus.labels, k, seeds=seeds, n_init=kmeans_n_init)
        else:
            scores = kmeans_scores(embeddings, corpus.labels, k, seeds=seeds, backend=backend, n_init=kmeans_n_init)
        out["datasets"][entry.name] = {
            **scores,
            "n": len(corpus.texts),
            "k": int(k),
            "seconds": round(time.perf_counter() - start, 1),
            "embed_seconds": round(embed_seconds, 1),
        }
        if log:
            log(
                f"clustering: {entry.name} ACC {100 * scores['acc']:.2f} ({100 * scores['acc_std']:.2f}) "
                f"NMI {100 * scores['nmi']:.2f} ({time.perf_counter() - start:.0f}s, embedding {embed_seconds:.0f}s)"
            )
    done = list(out["datasets"])
    out["avg_over"] = done
    out["avg"] = {m: float(np.mean([out["datasets"][d][m] for d in done])) if done else None
                  for m in catalogue.paper_names()}
    return out


def clustering_markdown(result: dict, label: str) -> str:
    """PairSupCon Table 1 layout: one row each for ACC and NMI, mean (std) x100."""
    names = [n for n in BENCHMARKS if n in result["datasets"]] + [n for n in result["datasets"] if n not in BENCHMARKS]
    heads = [SHORT_NAMES.get(n, n) for n in names]
    avg_name = "Avg." if len(names) == len(BENCHMARKS) else f"Avg. ({len(names)} sets)"
    lines = [
        f"KMeans on embeddings, seeds {result['seeds'][0]}..{result['seeds'][-1]} ({len(result['seeds'])} runs, "
        f"{kmeans_description(result.get('kmeans'))} each): mean (std) x100.",
        "",
        "| Model | Metric | " + " | ".join(heads) + f" | {avg_name} |",
        "|" + "---|" * (len(names) + 3),
    ]
    for metric in catalogue.paper_names():
        cells = [
            f"{100 * result['datasets'][n][metric]:.2f} ({100 * result['datasets'][n][metric + '_std']:.2f})"
            for n in names
        ]
        avg = result["avg"][metric]
        lines.append(
            f"| {label} | {metric.upper()} | "
            + " | ".join(cells)
            + f" | {'-' if avg is None else f'{100 * avg:.2f}'} |"
        )
    if result["skipped"]:
        lines += ["", "Skipped (data missing): " + ", ".join(f"{n} ({why})" for n, why in result["skipped"].items())]
    return "\n".join(lines) + "\n"


def kmeans_description(kmeans: dict | None) -> str:
    """'fast float32, 10 restarts' for a result's ``kmeans`` entry (older results name none: sklearn float64)."""
    if not kmeans:
        return "sklearn float64 n_init=10"
    if kmeans["backend"].endswith("(sparse)"):
        return f"{kmeans['backend']} float64, {kmeans['n_init']} restarts"
    return f"{kmeans['backend']} float32, {kmeans['n_init']} restarts"
