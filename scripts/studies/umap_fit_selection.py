"""Several UMAP fits of the same embeddings, and whether a run should keep one of them, chosen without labels: the
study that preceded ``umap.fits`` (docs/clusters.md, "Clustering space"). Choosing one fit did not help; keeping
several side by side did (``project_space`` against ``project_space_fits1`` in ``bertopic_side_by_side.py``).

UMAP + KMeans has modes: one fit of the same embeddings lands in a poorer partition than others. This script fits
``--fits`` UMAPs of each set's cached embeddings (``scripts/studies/bertopic_side_by_side.py``'s cache; UMAP seed =
KMeans seed = fit number), each one UMAP (``umap.fits=1``) with its KMeans (10 restarts) and its linear refinement,
and keeps their labels in ``<out>/fits/<set>_<fit>.npz``. Each replicate ``r`` of ``--seeds`` then looks at ``--pick``
fits, r to r+pick-1 (wrapping), and scores, with ACC / NMI / ARI against the labels:

- ``single``: fit r alone (the one-UMAP ``project_space_fits1`` row of that seed);
- ``spread``: the fit whose refined clusters have the smallest within-cluster sum of squares of the unit-length
  embeddings;
- ``consensus``: the fit whose refined clusters agree most with the others' (mean adjusted Rand index);
- ``oracle``: the best of the fits by ACC (what a perfect choice would reach; not a pipeline).

Labels are never used to choose. Run it again with more fits or sets and only the missing fits are computed.

    python scripts/studies/umap_fit_selection.py --data-dir data/short_text --out logs/studies/bertopic \\
        --fits 5 --pick 3 --seeds 0,1,2
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402

from scripts.studies.bertopic_side_by_side import default_data_dir, embeddings, load_set, scores  # noqa: E402

SETS = "agnews,biomedical,googlenews_s,googlenews_t,searchsnippets,stackoverflow,tweet"
CHOICES = ("single", "spread", "consensus", "oracle")


def fit_one(emb: np.ndarray, k: int, fit: int) -> dict:
    """Coordinates-free record of one fit: KMeans labels in the UMAP, refined labels, seconds."""
    from textcore.cluster_space import SpaceSettings, space_kmeans

    start = time.perf_counter()
    settings = SpaceSettings(space="umap", refine="linear", fit_sample=0, fits=1)  # one UMAP per fit, by definition
    result = space_kmeans(emb, k, fit, 10, "fast", None, settings)
    return {"space_labels": np.asarray(result.space_labels_), "labels": np.asarray(result.labels_),
            "seconds": time.perf_counter() - start}


def cached_fits(args, name: str, emb: np.ndarray, k: int) -> list[dict]:
    folder = Path(args.out) / "fits"
    folder.mkdir(parents=True, exist_ok=True)
    fits = []
    for fit in range(args.fits):
        path = folder / f"{name}_{fit}.npz"
        if not path.is_file():
            record = fit_one(emb, k, fit)
            np.savez(path, **record)
            print(f"[fit] {name} {fit}: {record['seconds']:.0f} s", flush=True)
        with np.load(path, allow_pickle=False) as saved:
            fits.append({key: saved[key] for key in saved.files})
    return fits


def spread(units: np.ndarray, labels: np.ndarray, k: int) -> float:
    """Within-cluster sum of squared distances of the unit-length embeddings to their cluster's mean."""
    from textcore.cluster_space import cluster_means

    return float(((units - cluster_means(units, labels, k)[labels]) ** 2).sum())


def choose(units: np.ndarray, k: int, fits: list[dict], truth: np.ndarray) -> dict[str, int]:
    """Index into ``fits`` chosen by each rule (``single`` is the first)."""
    from sklearn.metrics import adjusted_rand_score

    labels = [f["labels"] for f in fits]
    spreads = [spread(units, lab, k) for lab in labels]
    agreement = [statistics.fmean(adjusted_rand_score(a, b) for j, b in enumerate(labels) if j != i)
                 for i, a in enumerate(labels)] if len(labels) > 1 else [0.0]
    accs = [scores(truth, lab)["acc"] for lab in labels]
    return {"single": 0, "spread": int(np.argmin(spreads)), "consensus": int(np.argmax(agreement)),
            "oracle": int(np.argmax(accs))}


def run(args) -> list[dict]:
    records = []
    for name in args.sets.split(","):
        _, truth = load_set(Path(args.data_dir), name)
        k = int(len(np.unique(truth)))
        emb, _ = embeddings(Path(args.data_dir), name, Path(args.out) / "embeddings", args.max_length)
        units = emb / np.linalg.norm(emb, axis=1, keepdims=True).clip(1e-12)
        fits = cached_fits(args, name, emb, k)
        for r in (int(s) for s in args.seeds.split(",")):
            window = [fits[(r + j) % len(fits)] for j in range(args.pick)]
            chosen = choose(units, k, window, truth)
            for rule, index in chosen.items():
                record = {"set": name, "seed": r, "rule": rule, "fit": (r + index) % len(fits),
                          **scores(truth, window[index]["labels"]),
                          "seconds": sum(f["seconds"] for f in (window if rule != "single" else window[:1]))}
                records.append(record)
                print(f"[choice] {json.dumps(record)}", flush=True)
    return records


def table(records: list[dict]) -> str:
    lines = ["| set | rule | ACC | NMI | ARI | fits kept | seconds | seeds |", "|---|---|---|---|---|---|---|---|"]
    for name in dict.fromkeys(r["set"] for r in records):
        for rule in CHOICES:
            runs = [r for r in records if r["set"] == name and r["rule"] == rule]
            cells = []
            for metric in ("acc", "nmi", "ari"):
                values = [100 * r[metric] for r in runs]
                spread_ = statistics.stdev(values) if len(values) > 1 else 0.0
                cells.append(f"{statistics.fmean(values):.1f} ± {spread_:.1f}")
            lines.append(f"| {name} | {rule} | {' | '.join(cells)} | {','.join(str(r['fit']) for r in runs)} | "
                         f"{statistics.fmean(r['seconds'] for r in runs):.0f} | {len(runs)} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data-dir", default=str(default_data_dir()))
    parser.add_argument("--out", default=str(ROOT / "logs" / "studies" / "bertopic"))
    parser.add_argument("--sets", default=SETS)
    parser.add_argument("--fits", type=int, default=5, help="UMAP fits per set (seeds 0..fits-1)")
    parser.add_argument("--pick", type=int, default=3, help="fits each replicate chooses among")
    parser.add_argument("--seeds", default="0,1,2", help="replicates: replicate r looks at fits r..r+pick-1")
    parser.add_argument("--max-length", type=int, default=64)
    args = parser.parse_args()
    if not 1 <= args.pick <= args.fits:
        parser.error(f"--pick {args.pick}: from 1 to --fits ({args.fits}).")
    print(table(run(args)))


if __name__ == "__main__":
    main()
