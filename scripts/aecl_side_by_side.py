"""AECL's head beside the authors' own code at the same small budget (issue 32), several seeds each.

Runs, one after the other (each uses both cores), for every seed: the project (`run.py experiment=aecl_<set>` at
the budget below) and the authors' training (`scripts/authors_aecl.py`, which needs a snapshot of
YZH0905/AECL-STC); a run whose output exists is not run again, so the script can be stopped and started again.
Then prints the table of RESULTS.md "AECL's head beside the authors' code": per epoch end, head ACC and KMeans
ACC (mean ± std over the seeds that finished), the share of training rows with max p⁰ >= 0.95 per epoch, and
the final head cluster sizes.

    .venv/bin/python scripts/aecl_side_by_side.py --snapshot <AECL-STC git dir> --data <short_text folder> \
        --seeds 0,1,2 --out logs/aecl_side_by_side
    .venv/bin/python scripts/aecl_side_by_side.py --table-only --out logs/aecl_side_by_side

Budget (the issue's): batch 64, epochs of 100 batches, stage 1 for 2 epochs, stage 2 for 3, stage 3 for 2
(their --stage1_epoch 1 --stage2_epoch 3 --epochs 7; our method.e1=1 method.e2=3 with the reference schedule),
the offline MiniLM, their default SearchSnippets settings (the paper row's recipe).
"""
from __future__ import annotations

import argparse
import csv
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import run_folder  # noqa: E402
from evaluation.run_report import run_files  # noqa: E402

EPOCHS, BATCHES, E1, E2 = 7, 100, 1, 3


def ours_command(data: Path, seed: int, run_dir: Path, extra: list[str]) -> list[str]:
    return [sys.executable, "run.py", "experiment=aecl_searchsnippets", f"data_dir={data}", "trainer=cpu",
            "backbone=minilm", "batch_size=64", f"method.e1={E1}", f"method.e2={E2}",
            f"+trainer.limit_train_batches={BATCHES}", f"trainer.max_epochs={EPOCHS}", "trainer.max_steps=-1",
            "dataset.eval_batch_size=64", "dataset.eval_sort_by_length=false", "dataset.eval_shuffle_seed=0",
            f"dataset.callbacks.clustering_eval.every_n_steps={BATCHES}", "trainer.enable_progress_bar=false",
            "~callbacks.progress", "~callbacks.report", f"seed={seed}", f"hydra.run.dir={run_dir}", *extra]


def authors_command(snapshot: Path, data: Path, seed: int, out: Path) -> list[str]:
    return [sys.executable, "scripts/authors_aecl.py", "--snapshot", str(snapshot), "--data", str(data),
            "--stage1", str(E1), "--stage2", str(E2), "--epochs", str(EPOCHS), "--batches", str(BATCHES),
            "--batch-size", "64", "--seed", str(seed), "--out", str(out)]


def ours_rows(run_dir: Path) -> list[dict] | None:
    """Per epoch end: stage, head/KMeans ACC, confident share, (last epoch) head cluster sizes."""
    results = run_dir / run_folder.RESULTS
    # A stopped run also writes results.json; only a run that reached its last epoch counts.
    if not results.exists() or not (run_dir / run_files.PREDICTIONS).exists():
        return None
    history = json.loads(results.read_text())["clustering"]["history"]
    by_step = {int(h["step"]): h for h in history}
    confident: dict[int, list[float]] = {}
    with open(run_dir / "csv" / "metrics.csv") as handle:
        for row in csv.DictReader(handle):
            if row.get("train/confident_share") not in (None, ""):
                confident.setdefault(int(row["step"]) // BATCHES, []).append(float(row["train/confident_share"]))
    rows = []
    for epoch in range(1, EPOCHS + 1):
        h = by_step.get(epoch * BATCHES)
        if h is None:
            continue
        share = confident.get(epoch - 1)
        rows.append({"epoch": epoch, "head_acc": 100 * h["head_acc"], "kmeans_acc": 100 * h["kmeans_acc"],
                     "confident_share": 100 * statistics.mean(share) if share else None})
    if len(rows) < EPOCHS:
        return None
    with open(run_dir / run_files.PREDICTIONS) as handle:
        clusters = [row["head_cluster"] for row in csv.DictReader(handle)]
    rows[-1]["head_sizes"] = sorted((clusters.count(c) for c in set(clusters)), reverse=True)
    return rows


def ours_pseudo_label_acc(run_dir: Path, data: Path | None) -> float | None:
    """ACC x100 of the KMeans pseudo-labels our run trained stage 2 on (the module's ``pseudo_labels`` in its last
    checkpoint, row order of ``data``/searchsnippets.csv): in stage 2 the head is fitted to them."""
    checkpoint = run_dir / "checkpoints" / "last.ckpt"
    if data is None or not checkpoint.is_file():
        return None
    import pandas as pd
    import torch

    from evaluation.clustering.metrics import cluster_accuracy

    labels = pd.factorize(pd.read_csv(data / "searchsnippets.csv")["label"])[0]
    state = torch.load(checkpoint, map_location="cpu", weights_only=False)["state_dict"]
    return 100 * cluster_accuracy(labels, state["pseudo_labels"].numpy())


def authors_rows(path: Path) -> list[dict] | None:
    if not path.exists():
        return None
    rows = json.loads(path.read_text())["epochs"]
    return rows if len(rows) == EPOCHS else None


def _mean_std(values: list[float]) -> str:
    if not values:
        return "-"
    if len(values) == 1:
        return f"{values[0]:.2f}"
    return f"{statistics.mean(values):.2f} ± {statistics.stdev(values):.2f}"


def table(out: Path, seeds: list[int], data: Path | None = None) -> str:
    ours = {s: ours_rows(out / f"ours_s{s}") for s in seeds}
    theirs = {s: authors_rows(out / f"authors_s{s}.json") for s in seeds}
    ours = {s: r for s, r in ours.items() if r}
    theirs = {s: r for s, r in theirs.items() if r}
    lines = [f"seeds finished: ours {sorted(ours)}, authors' {sorted(theirs)}", "",
             "| end of epoch | stage | authors' head ACC | ours head ACC | authors' KMeans ACC | ours KMeans ACC "
             "| authors' max p⁰ >= 0.95 (%) | ours (%) |",
             "|---|---|---|---|---|---|---|---|"]
    for epoch in range(1, EPOCHS + 1):
        stage = 1 if epoch <= E1 + 1 else 2 if epoch <= E1 + 1 + E2 else 3

        def column(runs, key):
            return [row[key] for rows in runs.values() for row in rows
                    if row["epoch"] == epoch and row.get(key) is not None]

        lines.append(f"| {epoch} ({epoch * BATCHES}) | {stage} | {_mean_std(column(theirs, 'head_acc'))} "
                     f"| {_mean_std(column(ours, 'head_acc'))} | {_mean_std(column(theirs, 'kmeans_acc'))} "
                     f"| {_mean_std(column(ours, 'kmeans_acc'))} | {_mean_std(column(theirs, 'confident_share'))} "
                     f"| {_mean_std(column(ours, 'confident_share'))} |")
    # each run's head ACC at the end of each stage (epochs E1 + 1, E1 + 1 + E2 and the last)
    ends = (E1 + 1, E1 + 1 + E2, EPOCHS)
    lines += ["", "| code | seed | end of stage 1 | end of stage 2 | end of stage 3 | stage 3 change |",
              "|---|---|---|---|---|---|"]
    for name, runs in (("authors'", theirs), ("ours", ours)):
        for seed, rows in sorted(runs.items()):
            acc = [next(r["head_acc"] for r in rows if r["epoch"] == epoch) for epoch in ends]
            lines.append(f"| {name} | {seed} | {acc[0]:.2f} | {acc[1]:.2f} | {acc[2]:.2f} | {acc[2] - acc[1]:+.2f} |")
    lines.append("")
    for name, runs in (("authors'", theirs), ("ours", ours)):
        for seed, rows in sorted(runs.items()):
            sizes = ' / '.join(map(str, rows[-1]['head_sizes']))
            lines.append(f"final head cluster sizes, {name}, seed {seed}: {sizes}")
    for seed, rows in sorted(theirs.items()):
        acc = rows[-1].get("pseudo_label_acc")  # runs of authors_aecl.py before 2026-11-26 16:30 lack it
        if acc is not None:
            lines.append(f"ACC of the KMeans pseudo-labels of stage 2, authors', seed {seed}: {acc:.2f}")
    for seed in sorted(ours):
        acc = ours_pseudo_label_acc(out / f"ours_s{seed}", data)
        if acc is not None:
            lines.append(f"ACC of the KMeans pseudo-labels of stage 2, ours, seed {seed}: {acc:.2f}")
    return "\n".join(lines)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--snapshot", type=Path, help="YZH0905/AECL-STC git directory or checkout")
    parser.add_argument("--data", type=Path, help="folder with searchsnippets.csv")
    parser.add_argument("--seeds", default="0,1,2")
    parser.add_argument("--out", type=Path, default=ROOT / "logs" / "aecl_side_by_side")
    parser.add_argument("--only", choices=("ours", "authors"), help="run one side only")
    parser.add_argument("--table-only", action="store_true")
    parser.add_argument("extra", nargs="*", help="more run.py overrides for our side")
    args = parser.parse_args(argv)
    seeds = [int(s) for s in args.seeds.split(",")]
    args.out.mkdir(parents=True, exist_ok=True)
    if not args.table_only:
        if args.data is None or (args.only != "ours" and args.snapshot is None):
            parser.error("--data (and --snapshot for the authors' side) are needed to run")
        env = {**os.environ, "PROJECT_ROOT": str(ROOT), "TOKENIZERS_PARALLELISM": "false"}
        for seed in seeds:
            if args.only != "authors" and ours_rows(args.out / f"ours_s{seed}") is None:
                command = ours_command(args.data.resolve(), seed, (args.out / f"ours_s{seed}").resolve(), args.extra)
                print("$", " ".join(command), flush=True)
                subprocess.run(command, cwd=ROOT, env=env, check=True)
            if args.only != "ours" and authors_rows(args.out / f"authors_s{seed}.json") is None:
                command = authors_command(args.snapshot, args.data.resolve(), seed, args.out / f"authors_s{seed}.json")
                print("$", " ".join(command), flush=True)
                with open(args.out / f"authors_s{seed}.log", "w") as log:
                    subprocess.run(command, cwd=ROOT, env=env, check=True, stdout=log, stderr=subprocess.STDOUT)
    print(table(args.out, seeds, args.data))


if __name__ == "__main__":
    main()
