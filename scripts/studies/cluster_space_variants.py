"""Which clustering space a run's KMeans should use: variants of the UMAP step on the cached embeddings of
``scripts/studies/bertopic_side_by_side.py`` (docs/clusters.md, "Clustering space": how the default was chosen).

For each set and seed: KMeans (the project's, ``--n-init`` restarts) on the embeddings, and on UMAPs of them with
the n_components / n_neighbors / fits of ``--variants`` (``CxN``: one UMAP of C components and N neighbours;
``CxNxF``: F of them side by side, ``umap.fits``), without the linear refinement; ACC, NMI, ARI and the seconds of
the UMAP and of KMeans. A variant ending ``:average`` (or ``:ward``, ``:complete``) clusters its space with
scikit-learn's agglomerative clustering of that linkage into K instead of KMeans (``5x15x3:average``; the space is
fitted once for a set and seed and shared by the variants of its layout). All in one process, interleaved, so that
a busy machine slows every variant alike. Appends to ``<out>/variants.jsonl`` (a (set, variant, seed) already there
is not run again) and prints a Markdown table.

    python scripts/studies/cluster_space_variants.py --out logs/studies/bertopic_side_by_side \\
        --sets tweet,agnews,searchsnippets --variants 5x15,10x15,5x30 --seeds 0
    python scripts/studies/cluster_space_variants.py --out logs/studies/bertopic --max-texts 0 \\
        --sets googlenews_t --variants 5x15,15x15,5x15x3 --seeds 0,1,2
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


def run(args) -> None:
    from textcore.cluster_space import SpaceSettings, fit_space

    out = Path(args.out)
    results = out / "variants.jsonl"
    done = set()
    if results.is_file():
        done = {(r["set"], r["variant"], r["seed"]) for r in map(json.loads, results.read_text().splitlines())}
    for name in args.sets.split(","):
        _, labels = load_set(Path(args.data_dir), name, args.max_texts)
        k = int(len(np.unique(labels)))
        emb, _ = embeddings(Path(args.data_dir), name, out / "embeddings", args.max_length, args.max_texts)
        for seed in (int(s) for s in args.seeds.split(",")):
            spaces = {}  # layout -> (coordinates, seconds of their fit)
            for variant in ["embeddings", *args.variants.split(",")]:
                if (name, variant, seed) in done:
                    continue
                layout, _, linkage = variant.partition(":")
                if layout not in spaces:
                    start = time.perf_counter()
                    if layout == "embeddings":
                        space = emb
                    else:
                        components, neighbours, fits = (int(v) for v in (layout + "x1").split("x")[:3])
                        settings = SpaceSettings.from_config("umap", {"n_components": components,
                                                                      "n_neighbors": neighbours, "fits": fits,
                                                                      "fit_sample": 0, "refine": "none"})
                        space = fit_space(emb, settings, seed)[1]
                    spaces[layout] = space, time.perf_counter() - start
                space, fit_seconds = spaces[layout]
                reduced = time.perf_counter()
                found = cluster(space, k, seed, args.n_init, linkage)
                record = {"set": name, "variant": variant, "seed": seed, "n": len(labels), "k": k,
                          "n_init": args.n_init, **scores(labels, found),
                          "umap_seconds": fit_seconds, "kmeans_seconds": time.perf_counter() - reduced}
                with results.open("a") as handle:
                    handle.write(json.dumps(record) + "\n")
                print(f"[variant] {json.dumps(record)}", flush=True)


def cluster(space: np.ndarray, k: int, seed: int, n_init: int, linkage: str) -> np.ndarray:
    """K clusters of ``space``: the project's KMeans (``linkage`` empty), or agglomerative clustering of a linkage."""
    if not linkage:
        from textcore.kmeans import kmeans_fit

        return kmeans_fit(space, k, seed, n_init, "fast").labels_
    if linkage not in ("average", "ward", "complete", "single"):
        raise SystemExit(f"variant ...:{linkage}: the linkages are average, ward, complete, single")
    from sklearn.cluster import AgglomerativeClustering

    return AgglomerativeClustering(k, linkage=linkage).fit_predict(space)


def table(out: Path) -> str:
    records = [json.loads(line) for line in (out / "variants.jsonl").read_text().splitlines() if line]
    lines = ["| set | space (UMAP components x neighbours [x fits]) | ACC | NMI | ARI | UMAP s | KMeans s | seeds |",
             "|---|---|---|---|---|---|---|---|"]
    keys = sorted({(r["set"], r["variant"]) for r in records}, key=lambda k: (k[0], k[1] != "embeddings", k[1]))
    for name, variant in keys:
        runs = [r for r in records if r["set"] == name and r["variant"] == variant]
        cell = [f"{100 * statistics.fmean(r[m] for r in runs):.1f}" for m in ("acc", "nmi", "ari")]
        umap_seconds = statistics.fmean(r["umap_seconds"] for r in runs)
        lines.append(f"| {name} | {variant} | {' | '.join(cell)} | {umap_seconds:.0f}"
                     f" | {statistics.fmean(r['kmeans_seconds'] for r in runs):.0f} | {len(runs)} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data-dir", default=str(default_data_dir()))
    parser.add_argument("--out", default=str(ROOT / "logs" / "studies" / "bertopic_side_by_side"))
    parser.add_argument("--sets", default="tweet,agnews,searchsnippets")
    parser.add_argument("--variants", default="5x15,10x15,5x30")
    parser.add_argument("--seeds", default="0")
    parser.add_argument("--n-init", type=int, default=10)
    parser.add_argument("--max-length", type=int, default=64)
    parser.add_argument("--max-texts", type=int, default=5000)
    parser.add_argument("--table-only", action="store_true")
    args = parser.parse_args()
    if not args.table_only:
        run(args)
    print(table(Path(args.out)))


if __name__ == "__main__":
    main()
