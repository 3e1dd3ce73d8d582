"""What training did to a run's embeddings, seen by clustering them again: the embeddings a run saved before and after
training (``embeddings/before.npy`` and ``after.npy``, read with ``evaluation.model_io.run_files``), each clustered
with KMeans on the embeddings and in the clustering space (``--fits`` UMAPs side by side, the linear refinement), at
``--seeds``; ACC / NMI against the run's labels (docs/clusters.md, "Clustering space": what training adds).

The runs are those of ``scripts/studies/bertopic_side_by_side.py --rows project`` (``<out>/runs/<set>_k_<seed>...``).

    python scripts/studies/recluster_runs.py --runs logs/studies/bertopic/runs --match _fits3 --seeds 0,1,2
"""
from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402

from scripts.studies.bertopic_side_by_side import scores  # noqa: E402


def recluster(run: Path, seeds: list[int], fits: int) -> list[dict]:
    from evaluation.model_io import run_files
    from textcore.cluster_space import SpaceSettings, space_kmeans
    from textcore.kmeans import kmeans_fit

    truth = run_files.load_predictions(run).labels
    if truth is None:
        raise SystemExit(f"{run}: predictions.csv has no label column; a run with labels is needed.")
    truth = np.unique(truth.astype(str), return_inverse=True)[1]
    k = int(truth.max() + 1)
    rows = []
    for when, name in (("before", run_files.EMBEDDINGS_BEFORE), ("after", run_files.EMBEDDINGS_AFTER)):
        emb = run_files.load_array(run, name)
        if emb is None:
            raise SystemExit(f"{run / name}: missing; the run saved no {when}-training embeddings.")
        sample = run_files.load_array(run, run_files.EMBEDDINGS_BEFORE_ROWS) if when == "before" else None
        labels = truth if sample is None else truth[np.asarray(sample)]
        emb = run_files.rows_float32(emb)
        for seed in seeds:
            raw = kmeans_fit(emb, k, seed, 10, "fast").labels_
            space = space_kmeans(emb, k, seed, 10, "fast", 50000, SpaceSettings(space="umap", fits=fits)).labels_
            maps = f"{fits} UMAPs" if fits > 1 else "1 UMAP"
            for where, found in (("embeddings", raw), (f"space ({maps}, refined)", space)):
                rows.append({"run": run.name, "when": when, "where": where, "seed": seed, **scores(labels, found)})
                print(f"[recluster] {rows[-1]}", flush=True)
    return rows


def table(rows: list[dict]) -> str:
    lines = ["| run | clustered | before training (ACC / NMI) | after training (ACC / NMI) | seeds |",
             "|---|---|---|---|---|"]
    for run in dict.fromkeys(r["run"] for r in rows):
        for where in dict.fromkeys(r["where"] for r in rows):
            cells = []
            for when in ("before", "after"):
                found = [r for r in rows if (r["run"], r["where"], r["when"]) == (run, where, when)]
                cells.append(" / ".join(f"{100 * statistics.fmean(r[m] for r in found):.1f}" for m in ("acc", "nmi")))
            lines.append(f"| {run} | {where} | {cells[0]} | {cells[1]} | {len(found)} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", default=str(ROOT / "logs" / "studies" / "bertopic" / "runs"))
    parser.add_argument("--match", default="", help="only run folders whose name contains this")
    parser.add_argument("--seeds", default="0,1,2")
    parser.add_argument("--fits", type=int, default=0, help="UMAP fits (0: the default, umap.fits)")
    args = parser.parse_args()
    from evaluation.model_io.run_files import EMBEDDINGS_AFTER
    from textcore.cluster_space import SpaceSettings

    runs = sorted(p for p in Path(args.runs).iterdir() if args.match in p.name and (p / EMBEDDINGS_AFTER).is_file())
    if not runs:
        raise SystemExit(f"{args.runs}: no run folder with embeddings/after.npy matches {args.match!r}.")
    seeds = [int(s) for s in args.seeds.split(",")]
    rows = [row for run in runs for row in recluster(run, seeds, args.fits or SpaceSettings().fits)]
    print(table(rows))


if __name__ == "__main__":
    main()
