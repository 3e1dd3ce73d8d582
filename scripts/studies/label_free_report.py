"""How well the label-free choices pick, measured with the labels they never read (RESULTS.md).

    python scripts/studies/label_free_report.py --choose-k logs/label_free/choose_k --runs logs/label_free/selection \
        [--data-dir data/short_text]

- ``--choose-k``: folders ``<dataset>/choose_k.json`` written by ``python tools.py choose-k`` on the
  benchmark files; the true K is counted here from the file's label column (the tool never read it).
- ``--runs``: a multirun folder of clustering runs (``*/results.json``) that evaluated every N steps;
  for each, the KMeans ACC at the step each label-free criterion would pick, against the best ACC
  over the evaluations (picked with the labels: an oracle) and the last step's.
"""
from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from datamodules.download.catalogue import data_root  # noqa: E402
from evaluation.clustering.choose_k import RULES, recommend  # noqa: E402
from evaluation.clustering.label_free import best_index, stable_step  # noqa: E402
from textcore import run_folder  # noqa: E402

CRITERIA = (("silhouette", "max"), ("calinski_harabasz", "max"), ("davies_bouldin", "min"), ("dunn", "max"))
STOP_RULE = (0.01, 3)  # the documented example (docs/clusters.md), not tuned here


def true_k(data_dir: Path, name: str) -> int | None:
    import pandas as pd

    path = data_dir / f"{name}.csv"
    if not path.is_file():
        return None
    return int(pd.read_csv(path, usecols=["label"])["label"].nunique())


def choose_k_table(folder: Path, data_dir: Path) -> str:
    lines = ["| dataset | texts | true K | silhouette (the rule) | Calinski-Harabasz | Davies-Bouldin | stability "
             "| HDBSCAN clusters (noise %) |", "|---|---|---|---|---|---|---|---|"]
    ratios = []
    for path in sorted(folder.glob("*/choose_k.json")):
        result = json.loads(path.read_text())
        name = path.parent.name
        k = true_k(data_dir, name)
        picks = {rule: recommend(result["rows"], rule)["k"] for rule in RULES}
        if k:
            ratios.append(picks["silhouette"] / k)
        hdb = result["hdbscan"]
        hdb_text = f"{hdb['clusters']} ({100 * hdb['noise_share']:.0f} %)" if hdb.get("clusters") is not None else "-"
        lines.append(f"| {name} | {result['texts']} | {k or '-'} | **{picks['silhouette']}** | "
                     f"{picks['calinski_harabasz']} | {picks['davies_bouldin']} | {picks['stability']} | {hdb_text} |")
    if ratios:
        within = sum(0.5 <= r <= 2 for r in ratios)
        lines += ["", f"Recommended K within a factor 2 of the true K: {within} of {len(ratios)} sets; "
                      f"median ratio recommended / true {sorted(ratios)[len(ratios) // 2]:.2f}."]
    return "\n".join(lines) + "\n"


def _acc(entry: dict | None) -> float | None:
    value = (entry or {}).get("kmeans_acc")
    return None if value is None or not math.isfinite(value) else 100 * value


def selection_rows(runs: Path) -> list[dict]:
    rows = []
    for run in run_folder.find_runs([runs]):
        if not (run / run_folder.RESULTS).is_file():
            continue  # a failed or unfinished job
        results = json.loads((run / run_folder.RESULTS).read_text())
        history = (results.get("clustering") or {}).get("history") or []
        if not history or "kmeans_acc" not in history[0]:
            continue
        row = {"dataset": results["dataset"], "evaluations": len(history), "steps": results["steps"],
               "last": _acc(history[-1]), "oracle": max(_acc(h) for h in history),
               "oracle_step": history[best_index([h["kmeans_acc"] for h in history], "max")]["step"]}
        for name, direction in CRITERIA:
            i = best_index([h.get(f"kmeans_{name}") for h in history], direction)
            row[name] = (history[i]["step"], _acc(history[i])) if i is not None else (None, None)
        stop = stable_step(history, "kmeans_changed", *STOP_RULE)
        row["stop"] = (history[stop]["step"], _acc(history[stop])) if stop is not None else (None, None)
        row["changed"] = [h.get("kmeans_changed") for h in history]
        rows.append(row)
    return rows


def selection_table(rows: list[dict]) -> str:
    head = ["dataset", "last step", "best with labels (step)"] + [f"by {n} (step)" for n, _ in CRITERIA]
    lines = ["| " + " | ".join(head) + " | stop rule fired at |", "|" + "---|" * (len(head) + 1)]
    gaps = {n: [] for n, _ in CRITERIA}
    for r in rows:
        cells = [r["dataset"], f"{r['last']:.2f}", f"{r['oracle']:.2f} ({r['oracle_step']})"]
        for name, _ in CRITERIA:
            step, acc = r[name]
            cells.append("-" if acc is None else f"{acc:.2f} ({step})")
            if acc is not None:
                gaps[name].append(r["oracle"] - acc)
        stop_step, _ = r["stop"]
        cells.append("never" if stop_step is None else str(stop_step))
        lines.append("| " + " | ".join(cells) + " |")
    if rows:
        lines += ["", "Mean ACC lost against the best step picked with labels: " + ", ".join(
            f"{name} {sum(g) / len(g):.2f} points" for name, g in gaps.items() if g) + "; the last step: "
            f"{sum(r['oracle'] - r['last'] for r in rows) / len(rows):.2f} points."]
        lines += ["", "Share of texts that changed KMeans cluster between consecutive evaluations (%):", ""]
        lines += [f"- {r['dataset']}: " + ", ".join("-" if c is None else f"{100 * c:.1f}" for c in r["changed"])
                  for r in rows]
    return "\n".join(lines) + "\n"


def main(argv=None) -> str:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--choose-k", type=Path, default=None)
    parser.add_argument("--runs", type=Path, default=None)
    parser.add_argument("--data-dir", type=Path, default=data_root() / "short_text")
    args = parser.parse_args(argv)
    parts = []
    if args.choose_k:
        parts += ["### Choosing K without labels", "", choose_k_table(args.choose_k, args.data_dir)]
    if args.runs:
        parts += ["### Selecting the step without labels", "", selection_table(selection_rows(args.runs))]
    text = "\n".join(parts)
    print(text)
    return text


if __name__ == "__main__":
    main()
