"""Choose the number of clusters K without labels (docs/clusters.md, "Without labels"), given the texts'
embeddings: the scan and the recommendation, and their files. The command that reads a corpus or a run folder and
embeds the texts is ``python tools.py choose-k`` (:mod:`evaluation.model_io.embed_and_choose_k`); a training run calls
:func:`choose_k` for ``dataset.num_clusters=auto`` (``ctclust.training.auto_clusters``).

For each K, KMeans is fitted with ``seeds`` seeds (one restart each); the fit with the lowest inertia is scored
with the label-free criteria of ``evaluation.clustering.label_free`` (silhouette with cosine distance on a seeded
sample, Calinski-Harabasz, Davies-Bouldin), and the agreement of the seeds' partitions (mean pairwise ARI,
``stability``) says how reproducible the partition is. HDBSCAN (scikit-learn), which needs no K, gives its own
number of clusters as a reference.

The recommendation follows one stated rule (``rule``, default ``silhouette``: the K with the highest mean cosine
silhouette; ties to the smaller K). Any criterion can be the rule; the table shows all of them, so a reader can see
where they disagree. :func:`write_outputs` writes ``choose_k.json``, ``choose_k.md`` and ``choose_k.png`` (the
criteria against K).
"""
from __future__ import annotations

import itertools
import json
import time
from pathlib import Path
from typing import Callable, Sequence

import numpy as np

from evaluation.figures import new_figure, save_figure
from textcore.checkout import CONF
from textcore.errors import ConfigError

RULES = {  # name -> (criterion key, direction)
    "silhouette": ("silhouette", "max"),
    "calinski_harabasz": ("calinski_harabasz", "max"),
    "davies_bouldin": ("davies_bouldin", "min"),
    "stability": ("stability", "max"),
}


def conf_defaults() -> dict:
    """The scan's settings as conf/config.yaml's ``choose_k`` sets them (the one place of their defaults): ``k``,
    ``kmeans_runs``, ``rule``, ``silhouette_sample``, ``max_texts``; a run's own section overrides them, the
    ``choose-k`` command's options default to them."""
    from omegaconf import OmegaConf

    return OmegaConf.to_container(OmegaConf.load(CONF / "config.yaml").choose_k)


def parse_k(spec: str | Sequence[int], n_texts: int | None = None) -> list[int]:
    """``"2:60"`` (every K), ``"2:60:2"`` (a step), ``"4,8,20"`` (a list), or ranges and Ks joined by commas
    (``"2:60,65:200:5"``) -> sorted Ks >= 2 (and < n_texts)."""
    if isinstance(spec, (list, tuple)):
        ks = [int(k) for k in spec]
    else:
        try:
            ks = [k for part in str(spec).split(",") if part.strip() for k in _k_part(part.strip())]
        except ValueError:
            raise ConfigError(f"K range '{spec}': use lo:hi, lo:hi:step, a list such as 4,8,20, or ranges joined "
                              "by commas such as 2:60,65:200:5") from None
    ks = sorted({k for k in ks if k >= 2 and (n_texts is None or k < n_texts)})
    if not ks:
        raise ConfigError(f"K range '{spec}' holds no K " + _k_bounds(spec, n_texts))
    return ks


def _k_part(text: str) -> list[int]:
    """The Ks of one comma-separated part: ``lo:hi``, ``lo:hi:step`` or one K (ValueError when malformed)."""
    if ":" not in text:
        return [int(text)]
    parts = [int(p) for p in text.split(":")]
    if len(parts) not in (2, 3) or (len(parts) == 3 and parts[2] < 1):
        raise ValueError(text)
    return list(range(parts[0], parts[1] + 1, parts[2] if len(parts) == 3 else 1))


def _k_bounds(spec, n_texts: int | None) -> str:
    """What a K range must hold, with the numbers that bound it, and a range that would work."""
    parts = str(spec).strip().split(":")
    reversed_range = (len(parts) in (2, 3) and all(p.strip().lstrip("-").isdigit() for p in parts)
                      and int(parts[0]) > int(parts[1]))
    hint = f"; {parts[0]} > {parts[1]}: the smaller bound comes first" if reversed_range else ""
    if n_texts is None:
        return f"of at least 2{hint}. Use e.g. 2:20."
    if n_texts < 3:
        return f"between 2 and N - 1 = {n_texts - 1} (N = {n_texts} texts): choosing K needs at least 3 texts."
    return (f"between 2 and N - 1 = {n_texts - 1} (N = {n_texts} texts; K = N would put each text alone){hint}. "
            f"Use e.g. 2:{min(n_texts - 1, 20)}.")


def hdbscan_reference(embeddings: np.ndarray, min_cluster_size: int = 10, sample: int = 5000, seed: int = 0,
                      normalise: bool = True) -> dict:
    """HDBSCAN's number of clusters on (a seeded sample of) the embeddings, L2-normalised unless ``normalise`` is
    False (UMAP coordinates), and its noise share."""
    from sklearn.cluster import HDBSCAN

    n = len(embeddings)
    rows = np.arange(n) if n <= sample else np.random.default_rng(seed).choice(n, sample, replace=False)
    data = np.asarray(embeddings, dtype=np.float64)[rows]
    if normalise:
        data /= np.linalg.norm(data, axis=1, keepdims=True).clip(min=1e-12)  # Euclidean on the sphere ~ cosine
    labels = HDBSCAN(min_cluster_size=min(min_cluster_size, max(2, len(rows) // 2)), copy=True).fit(data).labels_
    return {
        "clusters": int(len(set(labels.tolist()) - {-1})),
        "noise_share": float(np.mean(labels == -1)),
        "min_cluster_size": int(min_cluster_size),
        "texts": int(len(rows)),
    }


def scan_k(
    embeddings: np.ndarray,
    ks: Sequence[int],
    seeds: int,
    silhouette_sample: int,
    *,
    kmeans_backend: str,
    log: Callable[[str], None] | None = None,
    metric: str = "cosine",
) -> list[dict]:
    """One row per K: silhouette (``metric`` distance), calinski_harabasz, davies_bouldin, stability, inertia,
    seconds."""
    from sklearn.metrics import adjusted_rand_score

    from evaluation.clustering.label_free import label_free_report
    from textcore.kmeans import kmeans_fit

    if seeds < 2:
        raise ConfigError(f"{seeds} KMeans run(s) per K: stability compares partitions, so at least 2 "
                          "(--kmeans-runs of choose-k, choose_k.kmeans_runs of run.py)")
    data = np.asarray(embeddings, dtype=np.float32)
    rows = []
    for k in ks:
        start = time.perf_counter()
        fits = [kmeans_fit(data, k, seed, 1, kmeans_backend) for seed in range(seeds)]
        best = min(fits, key=lambda f: f.inertia_)
        scores = label_free_report(data, best.labels_, k, sample=silhouette_sample, metric=metric)[0]
        stability = float(np.mean([adjusted_rand_score(a.labels_, b.labels_)
                                   for a, b in itertools.combinations(fits, 2)]))
        row = {"k": int(k), "silhouette": scores["silhouette"], "calinski_harabasz": scores["calinski_harabasz"],
               "davies_bouldin": scores["davies_bouldin"], "stability": stability,
               "size_entropy": scores["size_entropy"], "inertia": float(best.inertia_),
               "seconds": round(time.perf_counter() - start, 2)}
        rows.append(row)
        if log:
            log(f"choose_k: K={k:>4}  silhouette {_number(row['silhouette'], 4)}  "
                f"CH {_number(row['calinski_harabasz'], 1)}  DB {_number(row['davies_bouldin'], 3)}  "
                f"stability {stability:.3f}  ({row['seconds']} s)")
    return rows


def recommend(rows: Sequence[dict], rule: str = "silhouette") -> dict:
    """The recommended K under ``rule`` and the rule in words."""
    from evaluation.clustering.label_free import best_index

    if rule not in RULES:
        raise ConfigError(f"rule '{rule}': choose from {', '.join(RULES)}")
    key, direction = RULES[rule]
    i = best_index([r[key] for r in rows], direction)
    if i is None:
        raise ConfigError(f"no K has a finite {key}; widen the K range or check the texts")
    words = f"the K with the {'highest' if direction == 'max' else 'lowest'} {key.replace('_', '-')}"
    return {"k": int(rows[i]["k"]), "rule": rule, "rule_text": words + " (ties: the smaller K)",
            "value": rows[i][key]}


def choose_k(
    embeddings: np.ndarray,
    k: str | Sequence[int] | None = None,
    seeds: int | None = None,
    rule: str | None = None,
    silhouette_sample: int | None = None,
    hdbscan_min_cluster_size: int = 10,
    *,
    kmeans_backend: str,
    log: Callable[[str], None] | None = None,
    max_texts: int | None = None,
    space=None,
    seed: int = 0,
) -> dict:
    """Scan K over ``embeddings`` [n, d]; ``{"ks", "rows", "recommended", "hdbscan", ...}``.

    ``space`` (``textcore.cluster_space.SpaceSettings``): where the run's KMeans clusters. With a UMAP
    (``cluster_space=umap``) the scan fits that UMAP on the scanned sample (``seed``) and runs KMeans, the criteria
    (silhouette with Euclidean distance, as KMeans sees the coordinates) and HDBSCAN on its coordinates: K is then
    chosen where the run will cluster.

    ``max_texts``: KMeans and the criteria run on a seeded sample of this many texts (0: all); the
    cost of a scan grows with N x K, and K is a property of the corpus that a sample shows. A setting left None
    takes conf/config.yaml's (:func:`conf_defaults`; ``seeds`` is its ``kmeans_runs``).
    """
    if None in (k, seeds, rule, silhouette_sample, max_texts):
        defaults = conf_defaults()
        k = defaults["k"] if k is None else k
        seeds = defaults["kmeans_runs"] if seeds is None else seeds
        rule = defaults["rule"] if rule is None else rule
        silhouette_sample = defaults["silhouette_sample"] if silhouette_sample is None else silhouette_sample
        max_texts = defaults["max_texts"] if max_texts is None else max_texts
    if rule not in RULES:
        raise ConfigError(f"rule '{rule}': choose from {', '.join(RULES)}")
    total = len(embeddings)
    keep = scan_rows(total, max_texts)
    if keep is not None:
        embeddings = np.asarray(embeddings[keep])
    ks = parse_k(k, len(embeddings))
    start = time.perf_counter()
    metric, where = "cosine", {"space": "embeddings"}
    if space is not None and space.umap:
        from textcore.cluster_space import fit_space, space_record

        if log:
            log(f"choose_k: UMAP of the {len(embeddings)} scanned texts (cluster_space=umap), then the scan there")
        embeddings = fit_space(embeddings, space, seed)[1]
        metric, where = "euclidean", space_record(space)
    rows = scan_k(embeddings, ks, seeds, silhouette_sample, kmeans_backend=kmeans_backend, log=log, metric=metric)
    try:
        reference = hdbscan_reference(embeddings, hdbscan_min_cluster_size, normalise=metric == "cosine")
    except ValueError as err:  # too few texts for HDBSCAN
        reference = {"clusters": None, "note": str(err)}
    return {"texts": int(total), "texts_scanned": int(len(embeddings)), "ks": ks, "seeds": seeds, "space": where,
            "silhouette_sample": silhouette_sample, "rows": rows, "recommended": recommend(rows, rule),
            "hdbscan": reference, "seconds": round(time.perf_counter() - start, 1)}


# -- outputs -----------------------------------------------------------------------------------------------
def _number(value, digits: int) -> str:
    """A criterion for the table and the log; "-" where it is undefined for that K (None)."""
    return "-" if value is None or not np.isfinite(value) else f"{value:.{digits}f}"


def to_markdown(result: dict, title: str) -> str:
    rec, ref = result["recommended"], result["hdbscan"]
    lines = [f"# Choosing K: {title}", "",
             f"{result['texts']} texts ({result.get('texts_scanned', result['texts'])} of them scanned); "
             f"KMeans with {result['seeds']} seeds per K (one restart each; the lowest "
             "inertia scored); silhouette with cosine distance on at most "
             f"{result['silhouette_sample']} texts; stability = mean ARI between the seeds' partitions.", "",
             f"**Recommended K = {rec['k']}** ({rec['rule_text']}).", "",
             f"HDBSCAN (no K; min cluster size {ref.get('min_cluster_size', '-')}): "
             + (f"{ref['clusters']} clusters, {100 * ref['noise_share']:.0f} % of the texts as noise."
                if ref.get("clusters") is not None else ref.get("note", "not computed")), "",
             "| K | silhouette (max) | Calinski-Harabasz (max) | Davies-Bouldin (min) | stability (max) "
             "| size entropy |", "|---|---|---|---|---|---|"]
    for r in result["rows"]:
        mark = " **<-**" if r["k"] == rec["k"] else ""
        lines.append(f"| {r['k']}{mark} | {_number(r['silhouette'], 4)} | {_number(r['calinski_harabasz'], 1)} | "
                     f"{_number(r['davies_bouldin'], 3)} | {_number(r['stability'], 3)} | "
                     f"{_number(r['size_entropy'], 3)} |")
    return "\n".join(lines) + "\n"


def plot(result: dict, path: Path, title: str) -> Path:
    ks = [r["k"] for r in result["rows"]]
    panels = [("silhouette", "silhouette (cosine), higher is better"),
              ("calinski_harabasz", "Calinski-Harabasz, higher is better"),
              ("davies_bouldin", "Davies-Bouldin, lower is better"),
              ("stability", "stability (ARI between seeds), higher is better")]
    fig = new_figure(10, 6.5)
    axes = fig.subplots(2, 2, sharex=True)
    rec = result["recommended"]["k"]
    for ax, (key, label) in zip(axes.flat, panels):
        values = [np.nan if r[key] is None else r[key] for r in result["rows"]]  # undefined: a gap in the line
        ax.plot(ks, values, marker="o", markersize=3, color="tab:blue")
        ax.axvline(rec, color="tab:red", linestyle="--", linewidth=1,
                   label=f"recommended K={rec} ({result['recommended']['rule']})")
        hdb = result["hdbscan"].get("clusters")
        if hdb:
            ax.axvline(hdb, color="tab:green", linestyle=":", linewidth=1, label=f"HDBSCAN: {hdb} clusters")
        ax.set_title(label, fontsize=9)
        ax.grid(alpha=0.3)
    for ax in axes[1]:
        ax.set_xlabel("K (number of clusters)")
    axes.flat[0].legend(fontsize=8, loc="best")
    fig.suptitle(f"Choosing K without labels: {title}", fontsize=11)
    return save_figure(fig, path)


def write_outputs(result: dict, out: Path, title: str) -> list[Path]:
    out.mkdir(parents=True, exist_ok=True)
    (out / "choose_k.json").write_text(json.dumps(result, indent=2), encoding="utf-8")
    (out / "choose_k.md").write_text(to_markdown(result, title), encoding="utf-8")
    return [out / "choose_k.json", out / "choose_k.md", plot(result, out / "choose_k.png", title)]


def scan_rows(total: int, max_texts: int) -> np.ndarray | None:
    """The sorted rows a scan of ``total`` texts runs on (a seeded sample of ``max_texts``), or None for all: embed
    only these, and :func:`choose_k` given their embeddings scans exactly what it would have drawn itself."""
    if not max_texts or total <= max_texts:
        return None
    return np.sort(np.random.default_rng(0).choice(total, max_texts, replace=False))
