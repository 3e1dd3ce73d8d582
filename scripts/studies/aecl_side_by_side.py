"""AECL's head beside the authors' own code at the same small budget, several seeds each.

Runs, one after the other (each uses both cores), for every seed: the project (`run.py experiment=aecl_<set>` at
the budget below) and the authors' training (`scripts/studies/authors_aecl.py`, which needs a snapshot of
YZH0905/AECL-STC); a run whose output exists is not run again, so the script can be stopped and started again.
Then prints the table of RESULTS.md's "Beside the authors' code": per epoch end, head ACC and KMeans
ACC (mean ± std over the seeds that finished), the share of training rows with max p⁰ >= 0.95 per epoch, and
the final head cluster sizes.

    .venv/bin/python scripts/studies/aecl_side_by_side.py --snapshot <AECL-STC git dir> --data <short_text folder> \
        --seeds 0,1,2 --out logs/aecl_side_by_side
    .venv/bin/python scripts/studies/aecl_side_by_side.py --table-only --out logs/aecl_side_by_side

With `--swap`, each seed also runs the swap: our run stopped at the end of stage 2 (epoch 5,
`ours_s<seed>_to_e5`), our stage 3 resumed from its last.ckpt (`ours_s<seed>_from_e5`), and the authors' stage 3
started from that same checkpoint (`authors_aecl.py --init-from`, `authors_s<seed>_from_ours_e5.json`): both codes
train stage 3 from one state, so a fall that only ours shows is in our stage 3 and one both show is in the state.
Our full run is then those two halves (a resumed run continues exactly). `--device cuda` runs both codes on a GPU
(our side with trainer=gpu_fp32).

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

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from evaluation.model_io import run_files  # noqa: E402
from textcore import run_folder  # noqa: E402

EPOCHS, BATCHES, E1, E2 = 7, 100, 1, 3
SWAP_EPOCH = E1 + 1 + E2  # the last epoch of stage 2 (the reference schedule: stage 1 runs E1 + 1 epochs)
TRAINERS = {"cpu": "trainer=cpu", "cuda": "trainer=gpu_fp32"}


def ours_command(data: Path, seed: int, run_dir: Path, extra: list[str], epochs: int = EPOCHS,
                 device: str = "cpu") -> list[str]:
    return [sys.executable, "run.py", "experiment=aecl_searchsnippets", f"data_dir={data}", TRAINERS[device],
            "backbone=minilm", "batch_size=64", f"method.e1={E1}", f"method.e2={E2}",
            f"+trainer.limit_train_batches={BATCHES}", f"trainer.max_epochs={epochs}", "trainer.max_steps=-1",
            "dataset.eval_batch_size=64", "dataset.eval_sort_by_length=false", "dataset.eval_shuffle_seed=0",
            f"dataset.callbacks.clustering_eval.every_n_steps={BATCHES}", "trainer.enable_progress_bar=false",
            "~callbacks.progress", "~callbacks.report", f"seed={seed}", f"hydra.run.dir={run_dir}", *extra]


def authors_command(snapshot: Path, data: Path, seed: int, out: Path, device: str = "cpu") -> list[str]:
    return [sys.executable, "scripts/studies/authors_aecl.py", "--snapshot", str(snapshot), "--data", str(data),
            "--stage1", str(E1), "--stage2", str(E2), "--epochs", str(EPOCHS), "--batches", str(BATCHES),
            "--batch-size", "64", "--seed", str(seed), "--out", str(out), "--device", device]


def swap_paths(out: Path, seed: int, draw: int = 0) -> tuple[Path, Path, Path]:
    """Our run to the end of stage 2, our stage 3 resumed from it, and the authors' stage 3 from it. A ``draw`` > 0
    trains both stage 3s again from the same checkpoint with seed ``draw`` (another batch order; theirs also
    another dropout stream and evaluation permutation)."""
    tail = f"_draw{draw}" if draw else ""
    return (out / f"ours_s{seed}_to_e{SWAP_EPOCH}", out / f"ours_s{seed}_from_e{SWAP_EPOCH}{tail}",
            out / f"authors_s{seed}_from_ours_e{SWAP_EPOCH}{tail}.json")


def _finished(run_dir: Path) -> bool:
    # A stopped run also writes results.json; only a run that reached its last epoch writes predictions.
    return (run_dir / run_folder.RESULTS).exists() and (run_dir / run_files.PREDICTIONS).exists()


def ours_rows(run_dir: Path) -> list[dict] | None:
    """Per epoch end: stage, head/KMeans ACC, confident share, (last epoch) head cluster sizes. A seed run as the
    swap's two halves (``swap_paths``) is read from them."""
    if not _finished(run_dir):
        first, second, _ = swap_paths(run_dir.parent, int(run_dir.name.removeprefix("ours_s")))
        if not (_finished(first) and _finished(second)):
            return None
        early = [r for r in _ours_epochs(first) if r["epoch"] <= SWAP_EPOCH]
        late = [r for r in _ours_epochs(second) if r["epoch"] > SWAP_EPOCH]
        rows = early + late
        if [r["epoch"] for r in rows] != list(range(1, EPOCHS + 1)):
            return None
        rows[-1]["head_sizes"] = _head_sizes(second)
        return rows
    rows = _ours_epochs(run_dir)
    if len(rows) < EPOCHS:
        return None
    rows[-1]["head_sizes"] = _head_sizes(run_dir)
    return rows


def _head_sizes(run_dir: Path) -> list[int]:
    with open(run_dir / run_files.PREDICTIONS) as handle:
        clusters = [row["head_cluster"] for row in csv.DictReader(handle)]
    return sorted((clusters.count(c) for c in set(clusters)), reverse=True)


def _ours_epochs(run_dir: Path) -> list[dict]:
    """The epoch-end rows a finished run of ours evaluated (a resumed run: those after its checkpoint)."""
    results = run_dir / run_folder.RESULTS
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
    return rows


def ours_pseudo_label_acc(run_dir: Path, data: Path | None) -> float | None:
    """ACC x100 of the KMeans pseudo-labels our run trained stage 2 on (the module's ``pseudo_labels`` in its last
    checkpoint, row order of ``data``/searchsnippets.csv): in stage 2 the head is fitted to them."""
    checkpoint = run_dir / "checkpoints" / "last.ckpt"
    if data is None or not checkpoint.is_file():
        return None
    import pandas as pd
    import torch

    from evaluation.clustering.catalogue import cluster_accuracy

    labels = pd.factorize(pd.read_csv(data / "searchsnippets.csv")["label"])[0]
    state = torch.load(checkpoint, map_location="cpu", weights_only=False)["state_dict"]
    return 100 * cluster_accuracy(labels, state["pseudo_labels"].numpy())


def authors_rows(path: Path) -> list[dict] | None:
    if not path.exists():
        return None
    rows = json.loads(path.read_text())["epochs"]
    return rows if len(rows) == EPOCHS else None


def mean_std(values: list[float]) -> str:
    """A table cell: the mean ± sample std of ``values`` to two decimals (one value alone, ``-`` for none)."""
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

        lines.append(f"| {epoch} ({epoch * BATCHES}) | {stage} | {mean_std(column(theirs, 'head_acc'))} "
                     f"| {mean_std(column(ours, 'head_acc'))} | {mean_std(column(theirs, 'kmeans_acc'))} "
                     f"| {mean_std(column(ours, 'kmeans_acc'))} | {mean_std(column(theirs, 'confident_share'))} "
                     f"| {mean_std(column(ours, 'confident_share'))} |")
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


def swap_table(out: Path, seeds: list[int], draws: tuple[int, ...] = (0,)) -> str:
    """Both codes' stage 3 from our end-of-stage-2 checkpoint: head ACC at the start (each code's evaluation of
    the loaded state) and at the end of each stage-3 epoch, and the share of training rows with max p⁰ >= 0.95 per
    stage-3 epoch, per seed and draw."""
    later = range(SWAP_EPOCH + 1, EPOCHS + 1)
    lines = ["| seed | draw | code | " + " | ".join([f"start (step {SWAP_EPOCH * BATCHES})"]
                                                   + [f"end of epoch {e}" for e in later])
             + " | stage 3 change | max p⁰ >= 0.95 (%) |",
             "|---|---|---|" + "---|" * (len(later) + 3)]
    for seed in seeds:
        for draw in draws:
            first, second, theirs_path = swap_paths(out, seed, draw)
            if not (_finished(first) and _finished(second)):
                continue
            start = next((r["head_acc"] for r in _ours_epochs(first) if r["epoch"] == SWAP_EPOCH), None)
            runs = [("ours", start, [r for r in _ours_epochs(second) if r["epoch"] > SWAP_EPOCH])]
            if theirs_path.exists():
                rows = json.loads(theirs_path.read_text())["epochs"]
                loaded = next((r["head_acc"] for r in rows if r.get("loaded")), None)
                runs.append(("authors'", loaded, [r for r in rows if not r.get("loaded")]))
            for name, begin, rows in runs:
                accs = {r["epoch"]: r["head_acc"] for r in rows}
                shares = " / ".join(f"{r['confident_share']:.1f}" if r.get("confident_share") is not None else "-"
                                    for r in rows)
                cells = [f"{accs[e]:.2f}" if e in accs else "-" for e in later]
                change = f"{accs[EPOCHS] - begin:+.2f}" if begin is not None and EPOCHS in accs else "-"
                begin_cell = f"{begin:.2f}" if begin is not None else "-"
                lines.append(f"| {seed} | {draw} | {name} | {begin_cell} | " + " | ".join(cells)
                             + f" | {change} | {shares} |")
    return "\n".join(lines)


def _reached_last_epoch(path: Path) -> bool:
    return path.exists() and any(r["epoch"] == EPOCHS for r in json.loads(path.read_text())["epochs"])


def run_swap(args, seed: int, env: dict, draw: int = 0) -> None:
    """Our run to the end of stage 2, then both codes' stage 3 from its checkpoint (see the module docstring)."""
    first, second, theirs = swap_paths(args.out, seed, draw)
    data = args.data.resolve()
    if not _finished(first):
        command = ours_command(data, seed, first.resolve(), args.extra, epochs=SWAP_EPOCH, device=args.device)
        print("$", " ".join(command), flush=True)
        subprocess.run(command, cwd=ROOT, env=env, check=True)
    checkpoint = (first / "checkpoints" / "last.ckpt").resolve()
    # the two stage-3 runs from the checkpoint are independent: side by side on a GPU; one after the other on the
    # CPU, where two jobs of two threads each on two cores ran about ten times slower than one alone
    running = []

    def start(command, **kwargs):
        job = subprocess.Popen(command, cwd=ROOT, env=env, **kwargs)
        if args.device == "cpu":
            job.wait()
        running.append(job)

    if not _finished(second):
        command = ours_command(data, draw or seed, second.resolve(), [*args.extra, f"ckpt_path={checkpoint}"],
                               device=args.device)
        print("$", " ".join(command), flush=True)
        start(command)
    if args.snapshot is not None and not _reached_last_epoch(theirs):  # the file is written after every epoch
        command = [*authors_command(args.snapshot, data, draw or seed, theirs, args.device), "--init-from",
                   str(checkpoint),
                   "--start-epoch", str(SWAP_EPOCH)]
        print("$", " ".join(command), flush=True)
        with open(theirs.with_suffix(".log"), "w") as log:
            start(command, stdout=log, stderr=subprocess.STDOUT)
    failed = [" ".join(map(str, job.args)) for job in running if job.wait() != 0]
    if failed:
        raise SystemExit("failed: " + "; ".join(failed))


def main(argv=None) -> None:
    global BATCHES
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--snapshot", type=Path, help="YZH0905/AECL-STC git directory or checkout")
    parser.add_argument("--data", type=Path, help="folder with searchsnippets.csv")
    parser.add_argument("--seeds", default="0,1,2")
    parser.add_argument("--out", type=Path, default=ROOT / "logs" / "aecl_side_by_side")
    parser.add_argument("--only", choices=("ours", "authors"), help="run one side only")
    parser.add_argument("--table-only", action="store_true")
    parser.add_argument("--swap", action="store_true",
                        help="also (ours: instead of the full run) both codes' stage 3 from our end-of-stage-2 state")
    parser.add_argument("--device", choices=tuple(TRAINERS), default="cpu", help="where both codes train")
    parser.add_argument("--draws", default="0", help="with --swap: stage 3 again from the same checkpoint with these "
                        "seeds (0 = the seed's own run), e.g. 0,1,2")
    parser.add_argument("--batches", type=int, default=100,
                        help="training batches per epoch (100, the issue's budget; fewer only to try the script)")
    parser.add_argument("extra", nargs="*", help="more run.py overrides for our side")
    args = parser.parse_args(argv)
    BATCHES = args.batches
    seeds = [int(s) for s in args.seeds.split(",")]
    draws = tuple(int(d) for d in args.draws.split(","))
    args.out.mkdir(parents=True, exist_ok=True)
    if not args.table_only:
        if args.data is None or (args.only != "ours" and args.snapshot is None):
            parser.error("--data (and --snapshot for the authors' side) are needed to run")
        env = {**os.environ, "PROJECT_ROOT": str(ROOT), "TOKENIZERS_PARALLELISM": "false"}
        for seed in seeds:
            if args.swap and args.only != "authors":
                for draw in draws:
                    run_swap(args, seed, env, draw)
            elif args.only != "authors" and ours_rows(args.out / f"ours_s{seed}") is None:
                command = ours_command(args.data.resolve(), seed, (args.out / f"ours_s{seed}").resolve(), args.extra,
                                       device=args.device)
                print("$", " ".join(command), flush=True)
                subprocess.run(command, cwd=ROOT, env=env, check=True)
            if args.only != "ours" and authors_rows(args.out / f"authors_s{seed}.json") is None:
                command = authors_command(args.snapshot, args.data.resolve(), seed, args.out / f"authors_s{seed}.json",
                                          args.device)
                print("$", " ".join(command), flush=True)
                with open(args.out / f"authors_s{seed}.log", "w") as log:
                    subprocess.run(command, cwd=ROOT, env=env, check=True, stdout=log, stderr=subprocess.STDOUT)
    print(table(args.out, seeds, args.data))
    swap = swap_table(args.out, seeds, draws)
    if swap.count("\n") > 1:
        print("\nStage 3 of both codes from our end-of-stage-2 checkpoint (--swap):\n" + swap)


if __name__ == "__main__":
    main()
