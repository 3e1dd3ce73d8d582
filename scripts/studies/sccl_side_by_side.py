"""SCCL at the authors' full recipe beside their own code on one GPU: the same backbone (the offline MiniLM)
on both sides, batch 400, 1,000 steps (their run_explicit.sh), three seeds each, all runs side by side on the card;
KMeans ACC/NMI every 100 steps and at the end; our run in float32 (the papers'), TF32 and bf16, to see which
precision keeps the table (RESULTS.md, "SCCL beside the authors' code").

For every seed: the authors' training (scripts/studies/authors_sccl.py, which needs a snapshot of
amazon-science/sccl; float32, as they trained) and ours (`run.py experiment=sccl_searchsnippets` on the same file,
columns and backbone) in each of ``--precisions``. The runs start side by side (``--parallel``; by default all of
them on a GPU, as many as the card's free memory holds at an estimated few GiB each, one at a time on a CPU),
each its own process with its log in ``<out>/launch/``; a run whose output is there is not run again.

Data: SearchSnippets with the authors' two contextual-substitution views when ``searchsnippets_trans_subst_20.csv``
is in ``--data`` (`python tools.py download searchsnippets_views` makes it where there is internet); otherwise
``searchsnippets.csv`` with its one EDA column (text0, text1): their explicit loader then reads (text0, text0,
text1), ours views (text0, text1) and clusters text0's embedding of the first view (one encoder pass fewer: their
third pass gives the original another dropout draw). The table says which.

Both codes are scored by the project's KMeans protocol on their embeddings (seed = the run's seed, 10 restarts,
the device's backend: our run's evaluation, and authors_sccl.py's on theirs); the authors' own KMeans numbers
(scikit-learn, random_state = seed) are listed too. Their evaluation at step s follows s + 1 steps (their loop
evaluates after the step), ours at step s follows s steps.

    python scripts/studies/sccl_side_by_side.py --snapshot .gpu/official/sccl --data .gpu/data --device cuda \\
        --seeds 0,1,2 --precisions fp32,tf32,bf16 --out logs/sccl_side_by_side
    python scripts/studies/sccl_side_by_side.py --table-only --out logs/sccl_side_by_side
    python scripts/studies/sccl_side_by_side.py --smoke --data <short_text folder> --out /tmp/sbs [--snapshot ...]
        (a CPU check: the tiny backbone, 200 texts, 4 steps, seeds 0 and 1, fp32 and bf16)
"""
from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from scripts.studies.aecl_side_by_side import mean_std  # noqa: E402
from textcore import run_folder  # noqa: E402

CONTEXTUAL = "searchsnippets_trans_subst_20.csv"  # the authors' views (text, text1, text2)
EDA = "searchsnippets.csv"  # the AECL authors' file (label, text0, text1)
RECIPE = {"batch": 400, "steps": 1000, "every": 100}
SMOKE = {"batch": 16, "steps": 4, "every": 2, "rows": 200}
PRECISION_OVERRIDES = {  # launching.reproduce's --precision, as run.py overrides
    "fp32": ["++trainer.precision=32-true", "float32_matmul_precision=highest"],
    "tf32": ["++trainer.precision=32-true", "float32_matmul_precision=high"],
    "bf16": ["++trainer.precision=bf16-mixed"],
}
RUN_GIB = 6.0  # one SCCL run with MiniLM at batch 400 on a GPU, float32, a generous estimate (the authors' layout)


def columns(file: str) -> dict:
    """The columns of each side for the file: ours (text, views) and theirs (text, augmentation_1, _2)."""
    if file == CONTEXTUAL:
        return {"ours_text": "text", "ours_views": ["text1", "text2"], "theirs": ["text", "text1", "text2"]}
    return {"ours_text": "text0", "ours_views": ["text1"], "theirs": ["text0", "text0", "text1"]}


def classes_of(path: Path) -> int:
    import pandas as pd

    return int(pd.read_csv(path, usecols=["label"])["label"].nunique())


def ours_command(data: Path, file: str, backbone: str, batch: int, steps: int, every: int, seed: int,
                 precision: str, device: str, run_dir: Path, threads: int) -> list[str]:
    cols = columns(file)
    chosen = "backbone=minilm" if backbone == "minilm" else f"backbone.name={backbone}"
    return [sys.executable, "run.py", "experiment=sccl_searchsnippets", f"data_dir={data}", f"dataset.file={file}",
            f"dataset.text_column={cols['ours_text']}", f"dataset.aug_columns=[{','.join(cols['ours_views'])}]",
            chosen, f"batch_size={batch}", f"trainer.max_steps={steps}",
            f"dataset.callbacks.clustering_eval.every_n_steps={every}", f"seed={seed}",
            "trainer=gpu_fp32" if device == "cuda" else "trainer=cpu", *PRECISION_OVERRIDES[precision],
            "trainer.enable_progress_bar=false", "~callbacks.progress", "~callbacks.report", "print_table=false",
            f"threads_per_job={threads}", f"hydra.run.dir={run_dir}"]


def authors_command(snapshot: Path, data: Path, file: str, classes: int, backbone: str, batch: int, steps: int,
                    every: int, seed: int, device: str, out: Path) -> list[str]:
    text, aug1, aug2 = columns(file)["theirs"]
    return [sys.executable, "scripts/studies/authors_sccl.py", "--snapshot", str(snapshot), "--data", str(data),
            "--file", file, "--text", text, "--aug1", aug1, "--aug2", aug2, "--classes", str(classes),
            "--backbone", backbone, "--batch-size", str(batch), "--max-iter", str(steps), "--print-freq", str(every),
            "--seed", str(seed), "--device", device, "--out", str(out)]


# -- reading the runs -----------------------------------------------------------------------------------------------
def ours_history(run_dir: Path) -> dict | None:
    """{step: (KMeans ACC, NMI) x100} of a finished run of ours, and its wall time; None while unfinished."""
    results = run_dir / run_folder.RESULTS
    if not results.is_file():
        return None
    data = json.loads(results.read_text())
    if data.get("status", "finished") != "finished":
        return None
    history = (data.get("clustering") or {}).get("history") or []
    steps = {int(h["step"]): (100 * h["kmeans_acc"], 100 * h["kmeans_nmi"]) for h in history
             if h.get("kmeans_acc") is not None}
    return {"steps": steps, "seconds": (data.get("seconds") or {}).get("total")}


def authors_history(path: Path) -> dict | None:
    """{step: (KMeans ACC, NMI) x100} of a run of the authors' loop, with ``finished`` false where it stopped early
    (a time limit): the evaluations it reached still count, step by step; None before its first evaluation."""
    if not path.is_file():
        return None
    data = json.loads(path.read_text())
    if not data.get("evaluations"):
        return None
    steps = {int(r["step"]): (r["kmeans_acc"], r["kmeans_nmi"]) for r in data["evaluations"]}
    own = {int(r["step"]): (r["their_kmeans_acc"], r["their_kmeans_nmi"]) for r in data["evaluations"]}
    return {"steps": steps, "own": own, "seconds": data.get("total_seconds"), "finished": bool(data.get("finished"))}


def _inside(values: list[float], reference: list[float]) -> str:
    """Whether the mean of ``values`` lies within the seeds' range of ``reference`` (min to max)."""
    if not values or len(reference) < 2:
        return "-"
    mean = statistics.mean(values)
    return "yes" if min(reference) <= mean <= max(reference) else f"no ({mean - statistics.mean(reference):+.2f})"


def table(out: Path, seeds: list[int], precisions: list[str]) -> str:
    """The side-by-side table (mean ± std over the seeds that finished), per evaluation step and at the end."""
    setting = json.loads((out / "setting.json").read_text()) if (out / "setting.json").is_file() else {}
    sides = {"authors' fp32": {s: authors_history(out / f"authors_s{s}.json") for s in seeds}}
    for precision in precisions:
        sides[f"ours {precision}"] = {s: ours_history(out / f"ours_{precision}_s{s}") for s in seeds}
    sides = {name: {s: h for s, h in runs.items() if h} for name, runs in sides.items()}
    steps = sorted({step for runs in sides.values() for h in runs.values() for step in h["steps"]})
    stopped = [f"{name} seed {s} at step {max(h['steps'])}" for name, runs in sides.items()
               for s, h in sorted(runs.items()) if not h.get("finished", True)]
    lines = [f"SCCL on {setting.get('file', '?')} (views {setting.get('views', '?')}), backbone "
             f"{setting.get('backbone', '?')}, batch {setting.get('batch', '?')}, {setting.get('steps', '?')} steps, "
             f"device {setting.get('device', '?')}; KMeans ACC / NMI (x100) by the project's protocol on each code's "
             "embeddings, mean ± std over the seeds; seeds finished: "
             + "; ".join(f"{name} {sorted(s for s, h in runs.items() if h.get('finished', True))}"
                         for name, runs in sides.items())
             + ("; stopped before the end (their evaluations up to there are in the table): " + ", ".join(stopped)
                if stopped else ""), "",
             "| step | " + " | ".join(f"{name} ACC" for name in sides) + " | "
             + " | ".join(f"{name} NMI" for name in sides) + " |", "|---" * (1 + 2 * len(sides)) + "|"]
    for step in steps:
        acc = [mean_std([h["steps"][step][0] for h in runs.values() if step in h["steps"]]) for runs in sides.values()]
        nmi = [mean_std([h["steps"][step][1] for h in runs.values() if step in h["steps"]]) for runs in sides.values()]
        lines.append(f"| {step} | " + " | ".join(acc) + " | " + " | ".join(nmi) + " |")

    # where a run stopped early, every code is compared at the last step all of them reached
    last = min((max(h["steps"]) for runs in sides.values() for h in runs.values()), default=0)
    at = last if stopped else None

    def final(runs: dict, key: str = "steps", index: int = 0) -> list[float]:
        return [h[key][at if at is not None else max(h[key])][index] for h in runs.values()
                if h.get(key) and (at is None or at in h[key])]

    authors = sides["authors' fp32"]
    ours_fp32 = sides.get("ours fp32", {})
    when = "At the end of training" if at is None else f"At step {at}, the last one every run reached"
    lines += ["", f"{when} (within: the mean lies inside the reference's seeds, min to max; ours fp32 "
              "against the authors', TF32 and bf16 against ours fp32; wall: finished runs):", "",
              "| code | seeds | ACC | NMI | ACC within | NMI within | wall min (median) |", "|---" * 7 + "|"]
    for name, runs in sides.items():
        reference = authors if name == "ours fp32" else ours_fp32 if name.startswith("ours") else {}
        walls = sorted(h["seconds"] for h in runs.values() if h.get("seconds") and h.get("finished", True))
        wall = f"{walls[len(walls) // 2] / 60:.1f}" if walls else "-"
        lines.append(f"| {name} | {len(runs)} | {mean_std(final(runs))} | {mean_std(final(runs, index=1))} | "
                     f"{_inside(final(runs), final(reference)) if reference else '-'} | "
                     f"{_inside(final(runs, index=1), final(reference, index=1)) if reference else '-'} | {wall} |")
    if authors:
        lines += ["", f"The authors' own KMeans (scikit-learn, random_state = seed) "
                  f"{'at the end' if at is None else f'at step {at}'}: ACC "
                  f"{mean_std(final(authors, 'own'))}, NMI {mean_std(final(authors, 'own', 1))}."]
    packing_record = out / "packing.json"
    if packing_record.is_file():
        record = json.loads(packing_record.read_text())
        lines += ["", f"{record['runs_finished']} runs, {record.get('at_once', '?')} at a time on "
                  f"{', '.join(record['devices'])}, in {record['wall_seconds'] / 60:.1f} min of wall time."]
    return "\n".join(lines)


# -- running --------------------------------------------------------------------------------------------------------
def smoke_data(source: Path, dest: Path, rows: int) -> Path:
    """``rows`` texts of every class (every n-th row of the file), for a check on the CPU."""
    import pandas as pd

    frame = pd.read_csv(source)
    step = max(1, len(frame) // rows)
    dest.mkdir(parents=True, exist_ok=True)
    frame.iloc[::step].head(rows).to_csv(dest / source.name, index=False)
    return dest


def tiny_backbone(folder: Path) -> str:
    """A random small BERT with the MiniLM tokenizer saved as a model folder both codes load (--smoke)."""
    if not (folder / "config.json").is_file():
        from textcore.encoding.backbone import build_tiny_bert, load_tokenizer

        build_tiny_bert().save_pretrained(folder)
        load_tokenizer("tiny").save_pretrained(folder)
    return str(folder.resolve())


def main(argv=None) -> str:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--snapshot", type=Path, help="amazon-science/sccl: git dir, checkout or the bundle's copy")
    parser.add_argument("--data", type=Path, help=f"folder with {CONTEXTUAL} or {EDA}")
    parser.add_argument("--file", default=None, help=f"the CSV (default: {CONTEXTUAL} if there, else {EDA})")
    parser.add_argument("--backbone", default="minilm", help="minilm or a model folder (both codes load it)")
    parser.add_argument("--seeds", default=None, help="default 0,1,2 (--smoke: 0,1)")
    parser.add_argument("--precisions", default="fp32,tf32,bf16", help="our runs' precisions (theirs: fp32)")
    parser.add_argument("--device", default=None, help="cuda or cpu (default: cuda when there is one)")
    parser.add_argument("--parallel", type=int, default=None, help="runs at once (default: all that fit on a GPU; "
                        "1 on a CPU)")
    parser.add_argument("--steps", type=int, default=None, help=f"default {RECIPE['steps']}")
    parser.add_argument("--only", choices=("ours", "authors"), help="run one side only")
    parser.add_argument("--smoke", action="store_true", help="a CPU check at tiny scale (see the usage)")
    parser.add_argument("--table-only", action="store_true")
    parser.add_argument("--out", type=Path, default=ROOT / "logs" / "sccl_side_by_side")
    args = parser.parse_args(argv)
    seeds = [int(s) for s in (args.seeds or ("0,1" if args.smoke else "0,1,2")).split(",") if s.strip()]
    precisions = [p for p in args.precisions.split(",") if p]
    unknown = [p for p in precisions if p not in PRECISION_OVERRIDES]
    if unknown:
        parser.error(f"--precisions {','.join(unknown)}: choose among {', '.join(PRECISION_OVERRIDES)}")
    args.out.mkdir(parents=True, exist_ok=True)
    if args.smoke:
        precisions = [p for p in precisions if p != "tf32"]  # TF32 is a GPU's
    failed = [] if args.table_only else run_all(args, seeds, precisions)
    text = table(args.out, seeds, precisions)
    (args.out / "table.md").write_text(text + "\n")
    print(text)
    if failed:  # the table of what finished is written; the same command runs the failed ones again
        sys.exit(f"sccl_side_by_side: failed runs: {', '.join(failed)} (their logs in {args.out / 'launch'})")
    return text


def run_all(args, seeds: list[int], precisions: list[str]) -> list[str]:
    """Starts the runs not finished yet; returns the names of those that failed."""
    import torch

    from launching import packing
    from launching.reproduce import launch_packed
    from textcore.device_settings import usable_cores

    device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    if args.data is None:
        raise SystemExit("error: --data <folder with searchsnippets.csv> is needed to run")
    data = args.data.resolve()
    file = args.file or (CONTEXTUAL if (data / CONTEXTUAL).is_file() else EDA)
    if not (data / file).is_file():
        raise SystemExit(f"error: {data / file} is not there; `python tools.py download searchsnippets` (or "
                         "searchsnippets_views) fetches it")
    scale = dict(RECIPE)
    backbone = args.backbone
    if args.smoke:
        scale = dict(SMOKE)
        data = smoke_data(data / file, args.out / "smoke_data", SMOKE["rows"]).resolve()
        backbone = tiny_backbone(args.out / "smoke_backbone")
        device = "cpu"
    if args.steps:
        scale["steps"] = args.steps
    classes = classes_of(data / file)
    if classes < 2:
        raise SystemExit(f"error: {data / file} holds one class: clustering scores need several (a file sorted by "
                         "label and cut to its first rows? take rows over the whole file)")
    (args.out / "setting.json").write_text(json.dumps({
        "file": file, "views": columns(file)["theirs"], "backbone": args.backbone if not args.smoke else "tiny",
        "batch": scale["batch"], "steps": scale["steps"], "every": scale["every"], "device": device,
        "classes": classes}, indent=1))
    found = packing.devices(device == "cuda")
    jobs = []
    if args.only != "ours":
        if args.snapshot is None:
            print("sccl_side_by_side: no --snapshot of amazon-science/sccl: the authors' side is not run", flush=True)
        else:
            for seed in seeds:
                out = (args.out / f"authors_s{seed}.json").resolve()
                if authors_history(out) is None:
                    jobs.append(("authors", seed, authors_command(args.snapshot.resolve(), data, file, classes,
                                                                  backbone, scale["batch"], scale["steps"],
                                                                  scale["every"], seed, device, out)))
    wanted = [] if args.only == "authors" else [(p, s) for p in precisions for s in seeds
                                                 if ours_history(args.out / f"ours_{p}_s{s}") is None]
    parallel = args.parallel or (len(jobs) + len(wanted) if device == "cuda" else 1)
    if device == "cuda" and found[0].index is not None:
        fits = max(1, int(min(d.free_gib for d in found) // RUN_GIB))
        if fits < parallel:
            print(f"sccl_side_by_side: {parallel} runs at once would need about {parallel} x {RUN_GIB:.0f} GiB; "
                  f"{fits} at once", flush=True)
            parallel = fits
    threads = max(1, usable_cores() // max(1, min(parallel, len(jobs) + len(wanted))))
    for precision, seed in wanted:
        run_dir = (args.out / f"ours_{precision}_s{seed}").resolve()
        jobs.append((f"ours_{precision}", seed, ours_command(data, file, backbone, scale["batch"], scale["steps"],
                                                             scale["every"], seed, precision, device, run_dir,
                                                             threads)))
    if not jobs:
        return []
    os.environ["OMP_NUM_THREADS"] = str(threads)  # the authors' processes: their share of the cores
    runs_per_device = math.ceil(min(parallel, len(jobs)) / len(found))
    failed, record = launch_packed(jobs, packing.slots(found, runs_per_device), args.out)
    record["at_once"] = min(parallel, len(jobs))
    (args.out / "packing.json").write_text(json.dumps(record, indent=1) + "\n")
    return failed


if __name__ == "__main__":
    main()
