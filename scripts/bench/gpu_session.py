"""The prepared GPU measurement session, in parts that fit a short allocation (docs/gpu.md, "The prepared
session"); run by ``bash scripts/bench/gpu_node.sh --session [PARTS]``, which sets up the bundle's Python first.

Parts, in the order they run (``--parts``, default all of them):

- ``quality``: SCCL at the authors' recipe beside their code, the offline MiniLM on both sides, batch 400, 1,000
  steps, seeds 0-2, both in float32, the six runs side by side on the card (scripts/studies/sccl_side_by_side.py):
  RESULTS.md's table;
- ``precision``: our runs of the same recipe and seeds in TF32 and bf16, side by side, and the table with all of
  them: which precision keeps the table;
- ``profile``: where a bf16 step's time goes, end to end beside the raw step, for SCCL and AECL, and CUDA's host
  syncs between logging steps of every method (scripts/bench/profile_loop.py);
- ``packing``: 1, 2 and 4 SCCL runs side by side on the card (``tools.py reproduce --runs-per-gpu N``, bf16,
  random-init DistilBERT, StackOverflow, 100 steps, KMeans every 100): runs finished per hour, the evaluation's
  share of a run, and the time to SCCL's Table 1 (8 sets x 3 seeds x 3,000 steps) estimated from those parts;
- ``steps``: cached gradients in bf16 against the plain step (budgets 2048 and 16384 tokens) and the compiled step in
  steady state (``torch.compile`` default mode), eager and compiled, lengths bucketed to multiples of 8
  (scripts/bench/gpu.py; other modes, e.g. CUDA graphs: ``gpu.py --compile reduce-overhead``).
- ``corpus``: ``tools.py predict`` of 200,000 texts on the GPU against one CPU process with every core, and KMeans of
  1,000,000 rows (fitted on a 50,000-row sample, every row assigned) on the GPU against the CPU
  (scripts/bench/corpus_devices.py).

In a short allocation (a scheduler's time limit of minutes) the parts go in commands one after the other:
``BUDGET=660 ... --session quality``, ``BUDGET=540 ... --session profile,steps,packing`` and ``BUDGET=500 ...
--session precision,corpus`` (about 11, 9 and 8 minutes); a part that does not fit is printed as not run, for a
later ``--session <parts>``. With more time, all of them at once with a larger ``BUDGET``.

A part starts only if its expected time (``EXPECTED``, seconds on an H100) fits in what is left of ``--budget-s``;
each runs with the time left as its limit. Work goes to ``--work`` (checkpoints, run folders); a part whose
``done.json`` is there is not run again, so the same command run again goes on where the last one stopped.
``--collect <folder>`` puts the few small files worth copying back from the node there (at most 8): session.md (every
table, to paste into BENCHMARKS.md and RESULTS.md, with what was not run), session.json, results.tar.gz (the
parts' tables, JSON and logs) and the SCCL trace. ``--tiny`` runs every part at smoke scale on a CPU.
"""
from __future__ import annotations

import argparse
import datetime as dt
import json
import math
import os
import shutil
import subprocess
import sys
import tarfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

PARTS = ("quality", "precision", "profile", "packing", "steps", "corpus")
# seconds of each part. Measured on an H200 (2026-11-29, BENCHMARKS.md): quality (the six runs side by side: ours
# 372 s, the authors' loop 500 s for 900 of its 1,000 steps), steps 96 s, packing 77 s for its first of three
# commands; precision (six runs of ours, side by side as in quality), profile and corpus are estimates
EXPECTED = {"quality": 600, "precision": 300, "profile": 110, "packing": 280, "steps": 100, "corpus": 150}
EXPECTED_TINY = {"quality": 45, "precision": 30, "profile": 40, "packing": 80, "steps": 60, "corpus": 45}
PACKING = (1, 2, 4)
PACKING_STEPS, PACKING_EVERY = 100, 100
TABLE1_RUNS, TABLE1_STEPS, TABLE1_EVERY = 8 * 3, 3000, 100
# the authors' own SCCL loop, fp32, batch 400, DistilBERT-base, on an H100 (BENCHMARKS.md, 2026-11-26: 3.49 steps/s
# end to end): the figure the time to Table 1 is set beside until this card measures it
AUTHORS_STEPS_PER_S = 3.49


def python() -> str:
    return sys.executable


def commands(part: str, args, work: Path) -> list[list[str]]:
    """The commands of a part at the paper's scale or, with ``--tiny``, at smoke scale on the CPU."""
    data, out = str(args.data_dir), work / part
    snapshot = args.bundle / "official" / "sccl"
    if part in ("quality", "precision"):  # one folder: the precision part's table holds the quality part's runs
        out = work / "quality"
        precisions = "fp32" if part == "quality" else "fp32,bf16" if args.tiny else "fp32,tf32,bf16"
        scale = ["--smoke", "--seeds", "0"] if args.tiny else ["--device", "cuda", "--seeds", "0,1,2"]
        command = [python(), "scripts/studies/sccl_side_by_side.py", *scale, "--data", data, "--precisions",
                   precisions, "--out", str(out)]
        if part == "precision":
            command += ["--only", "ours"]  # fp32 is there from the quality part (or runs now if it is not)
        return [command + (["--snapshot", str(snapshot)] if snapshot.is_dir() else [])]
    if part == "profile":
        scale = (["--tiny", "--device", "cpu", "--precision", "fp32", "--methods", "sccl", "--steps", "2", "--warmup",
                  "1", "--trace-steps", "1"] if args.tiny else
                 ["--precision", "bf16", "--methods", "sccl,aecl", "--steps", "30", "--warmup", "8", "--trace-steps",
                  "3", "--sync-steps", "10"])
        return [[python(), "scripts/bench/profile_loop.py", *scale, "--count-syncs", "--data-dir", data, "--out",
                 str(out)]]
    if part == "steps":
        scale = (["--device", "cpu", "--tiny", "--methods", "sccl", "--precisions", "fp32", "--steps", "1",
                  "--warmup", "0", "--chunk-tokens", "24", "--grad-cache", "0,24", "--compile", "default",
                  "--compile-backend", "eager", "--distinct-batches", "2"] if args.tiny else
                 ["--methods", "sccl,aecl", "--precisions", "bf16", "--steps", "10", "--warmup", "2", "--chunk-tokens",
                  "8192", "--grad-cache", "0,2048,16384", "--compile", "default", "--distinct-batches", "8"])
        return [[python(), "scripts/bench/gpu.py", *scale, "--bucket", "0,8", "--compile-bucket", "8", "--data-dir",
                 data, "--out", str(out / "bench_gpu.md")]]
    if part == "packing":
        return [packing_command(n, args, work) for n in (PACKING[:2] if args.tiny else PACKING)]
    if part == "corpus":
        return [[python(), "scripts/bench/corpus_devices.py", "--out", str(out), *(["--tiny"] if args.tiny else [])]]
    raise ValueError(part)


def packing_command(n: int, args, work: Path) -> list[str]:
    """``tools.py reproduce`` of SCCL's StackOverflow row, n runs at once on the card (bf16; the EDA column as the
    view, random-init DistilBERT-base: its speed is the trained one's)."""
    out = work / "packing" / f"n{n}"
    common = [f"data_dir={args.data_dir}", "dataset.file=stackoverflow.csv", "dataset.text_column=text0",
              "dataset.aug_columns=[text1]"]
    if args.tiny:
        scale = ["trainer=cpu", "backbone=tiny", "batch_size=8", "max_length=16", "trainer.max_steps=2",
                 "dataset.callbacks.clustering_eval.every_n_steps=1",
                 "dataset.callbacks.clustering_eval.kmeans_n_init=2", "method.callbacks.centroid_init.n_init=2",
                 "callbacks.report.plots=false"]
    else:
        from scripts.bench.gpu_steps.shared import backbone_folder

        folder = backbone_folder("distilbert-base", False, work / "backbones")
        scale = [f"backbone.name={folder}", f"trainer.max_steps={PACKING_STEPS}",
                 f"dataset.callbacks.clustering_eval.every_n_steps={PACKING_EVERY}"]
    seeds = ",".join(str(s) for s in range(n))
    return [python(), "tools.py", "reproduce", "sccl_table1", "--rows", "sccl_stackoverflow", "--seeds", seeds,
            "--runs-per-gpu", str(n), "--precision", "bf16" if not args.tiny else "fp32", "--output", str(out),
            *common, *scale, "print_table=false"]


# -- what each part gave ----------------------------------------------------------------------------------------
def packing_summary(work: Path, tiny: bool = False) -> tuple[str, dict]:
    """Runs per hour for each N, the evaluation's share of a run, and the time to Table 1 from those parts."""
    rows, numbers = [], {}
    for folder in sorted((work / "packing").glob("n*"), key=lambda p: int(p.name[1:])):
        record_path = folder / "packing.json"
        if not record_path.is_file():
            continue
        record = json.loads(record_path.read_text())
        runs = [json.loads(p.read_text()) for p in folder.glob("*/seed_*/results.json")]
        runs = [r for r in runs if r.get("status") == "finished"]
        if not runs:
            continue
        n = int(folder.name[1:])
        seconds = [r.get("seconds") or {} for r in runs]
        histories = [(r.get("clustering") or {}).get("history") or [] for r in runs]
        steps = [int(r.get("steps") or 0) for r in runs]
        # the evaluations between the first and the last step (not the one before training, not the last)
        during = [sum(h.get("eval_seconds", 0.0) for h in history if 0 < int(h["step"]) < n_steps)
                  for history, n_steps in zip(histories, steps)]
        timed = [h.get("eval_seconds", 0.0) for history in histories for h in history]
        training = [s.get("training", 0.0) for s in seconds]
        evaluation_s = sum(timed) / max(1, len(timed))  # one evaluation (embedding, KMeans, scores)
        medians = [s.get("step_median") for s in seconds]
        if all(medians):
            # a step's steady cost (results.json's median step time); the rest of a run is fixed: start-up, the
            # first steps' warm-up, the evaluations' own time counted apart, the end
            step_s = sum(medians) / len(medians)
            fixed = sum(max(0.0, s.get("total", 0.0) - n_steps * step_s - sum(h.get("eval_seconds", 0.0) for h in hist))
                        for s, n_steps, hist in zip(seconds, steps, histories)) / len(runs)
        else:  # runs from before the median was recorded: the training time less the evaluations during it
            step_s = sum(t - e for t, e in zip(training, during)) / max(1, sum(steps))
            fixed = sum(s.get("total", 0.0) - s.get("training", 0.0) for s in seconds) / len(runs)
        share = sum(timed) / max(1e-9, sum(s.get("total", 0.0) for s in seconds))
        per_run = fixed + TABLE1_STEPS * step_s + (TABLE1_STEPS // TABLE1_EVERY + 1) * evaluation_s
        table1_h = math.ceil(TABLE1_RUNS / n) * per_run / 3600
        numbers[n] = {"runs_per_hour": record["runs_per_hour"], "wall_s": record["wall_seconds"],
                      "step_s": step_s, "evaluation_s": evaluation_s, "evaluation_share": share,
                      "fixed_s": fixed, "table1_hours": table1_h}
        rows.append(f"| {n} | {len(runs)} | {record['wall_seconds']:.0f} | {record['runs_per_hour']:.1f} | "
                    f"{1 / step_s:.2f} | {evaluation_s:.1f} | {100 * share:.0f} % | {fixed:.0f} | {table1_h:.2f} |")
    if not rows:
        return "", numbers
    authors_h = TABLE1_RUNS * TABLE1_STEPS / AUTHORS_STEPS_PER_S / 3600
    scale = ("--precision fp32`, --tiny: the tiny backbone, batch 8, 2 steps, KMeans every step: a check, not a "
             "measurement" if tiny else f"--precision bf16`, random-init DistilBERT-base, batch 400, {PACKING_STEPS} "
             f"steps, KMeans every {PACKING_EVERY}")
    text = "\n".join([
        f"Several SCCL runs on one card (`tools.py reproduce sccl_table1 --rows sccl_stackoverflow --runs-per-gpu N "
        f"{scale}); the time to SCCL's Table 1 ({TABLE1_RUNS} runs x {TABLE1_STEPS} steps, an evaluation "
        f"every {TABLE1_EVERY}) estimated from these parts: the fixed time (start-up, the first steps' warm-up, the "
        f"end) + {TABLE1_STEPS} steps at a run's median step time + {TABLE1_STEPS // TABLE1_EVERY + 1} evaluations a "
        "run, N at a time:", "",
        "| runs per card | runs | wall s | runs per hour | steps/s a run (median step) | s an evaluation | "
        "evaluation share | fixed s a run | Table 1, hours |", "|---" * 9 + "|", *rows, "",
        f"The authors' own loop (fp32, {AUTHORS_STEPS_PER_S} steps/s, one run after another; BENCHMARKS.md, H100, "
        f"2026-11-26), training steps alone: {authors_h:.1f} hours."])
    return text, numbers


def section(part: str, work: Path, tiny: bool = False) -> str:
    out = work / part
    if part in ("quality", "precision"):
        path = work / "quality" / "table.md"
    elif part == "profile":
        path = out / "profile.md"
    elif part == "steps":
        path = out / "bench_gpu.md"
    elif part == "corpus":
        path = out / "corpus_devices.md"
    else:
        return packing_summary(work, tiny)[0]
    return path.read_text().strip() if path.is_file() else ""


# -- the session ----------------------------------------------------------------------------------------------
def run_part(part: str, args, work: Path, deadline: float) -> dict:
    """Runs the part's commands with the time left as their limit; its done.json when they all succeeded."""
    (work / part).mkdir(parents=True, exist_ok=True)
    log = work / part / "session.log"
    began = time.time()
    codes = []
    env = {**os.environ, "PROJECT_ROOT": str(ROOT), "PYTHONUNBUFFERED": "1"}
    for command in commands(part, args, work):
        # the paths under the checkout relative to it (the commands run there): the tables they write name them,
        # and the tables go into committed files
        command = [command[0], *(a.replace(f"{ROOT}/", "") for a in command[1:])]
        left = deadline - time.time()
        shown = " ".join(["python", *command[1:]])
        print(f"gpu_session: {part}: $ {shown}", flush=True)
        with log.open("a") as handle:
            handle.write(f"$ {shown}\n")
            handle.flush()
            try:
                codes.append(subprocess.run(command, cwd=ROOT, env=env, stdout=handle, stderr=subprocess.STDOUT,
                                            timeout=max(1.0, left)).returncode)
            except subprocess.TimeoutExpired:
                codes.append("time limit")
                break
    result = {"part": part, "seconds": round(time.time() - began, 1), "exit": codes,
              "ok": all(c == 0 for c in codes)}
    if result["ok"]:
        (work / part / "done.json").write_text(json.dumps(result) + "\n")
    else:
        print(f"gpu_session: {part} did not finish ({codes}); the end of {log}:", flush=True)
        print("\n".join(log.read_text().splitlines()[-15:]), flush=True)
    return result


def collect(work: Path, dest: Path, text: str, record: dict) -> list[str]:
    """At most 8 files into ``dest``: session.md, session.json, results.tar.gz (tables, JSON, logs under a few MiB)
    and the SCCL trace of the profile part."""
    dest.mkdir(parents=True, exist_ok=True)
    (dest / "session.md").write_text(text)
    (dest / "session.json").write_text(json.dumps(record, indent=1) + "\n")
    with tarfile.open(dest / "results.tar.gz", "w:gz") as archive:
        for path in sorted(work.rglob("*")):
            small = path.is_file() and path.stat().st_size < 4 * 2**20
            if small and path.suffix in (".md", ".json", ".log", ".csv") and "checkpoints" not in path.parts:
                archive.add(path, arcname=str(path.relative_to(work)))
    trace = work / "profile" / "trace_sccl.json.gz"
    if trace.is_file() and trace.stat().st_size < 15 * 2**20:
        shutil.copy2(trace, dest / trace.name)
    return sorted(p.name for p in dest.iterdir())


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--parts", default=",".join(PARTS), help=f"among {', '.join(PARTS)}")
    parser.add_argument("--budget-s", type=float, default=540.0, help="seconds for all parts together")
    parser.add_argument("--bundle", type=Path, default=ROOT / ".gpu", help="the bundle (official/sccl/ in it)")
    parser.add_argument("--data-dir", type=Path, default=None, help="default: <bundle>/data")
    parser.add_argument("--work", type=Path, default=ROOT / "logs" / "gpu_session")
    parser.add_argument("--collect", type=Path, default=None,
                        help="the folder for the few small files to copy back from the node")
    parser.add_argument("--tiny", action="store_true", help="every part at smoke scale on the CPU")
    args = parser.parse_args(argv)
    parts = [p for p in args.parts.split(",") if p]
    unknown = [p for p in parts if p not in PARTS]
    if unknown:
        parser.error(f"--parts {','.join(unknown)}: choose among {', '.join(PARTS)}")
    args.bundle = args.bundle.resolve()
    args.data_dir = (args.data_dir or args.bundle / "data").resolve()
    work = args.work.resolve()
    work.mkdir(parents=True, exist_ok=True)
    began = time.time()
    deadline = began + args.budget_s
    expected = EXPECTED_TINY if args.tiny else EXPECTED
    results, not_run = {}, []
    for part in parts:
        if (work / part / "done.json").is_file():
            results[part] = {**json.loads((work / part / "done.json").read_text()), "earlier": True}
            continue
        left = deadline - time.time()
        if left < expected[part]:
            not_run.append(f"{part} (expected about {expected[part]} s, {max(0, left):.0f} s left)")
            continue
        results[part] = run_part(part, args, work, deadline)
    device = _device()
    when = dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    lines = [f"# GPU session: {device}, {when}", "",
             f"`bash scripts/bench/gpu_node.sh --session {','.join(parts)}`"
             + (" (--tiny: smoke scale on a CPU, not a measurement)" if args.tiny else ""), ""]
    for part in parts:
        text = section(part, work, args.tiny)
        status = results.get(part)
        state = "not run" if status is None else "finished" if status["ok"] else f"stopped ({status['exit']})"
        lines += [f"## {part}: {state}", "", text or "(nothing measured)", ""]
    if not_run:
        lines += ["Not run within the budget (the same command again runs what is left): " + "; ".join(not_run)]
    text = "\n".join(lines).rstrip() + "\n"
    (work / "session.md").write_text(text)
    record = {"device": device, "when": when, "parts": results, "not_run": not_run, "tiny": args.tiny,
              "packing": packing_summary(work)[1], "seconds": round(time.time() - began, 1)}
    (work / "session.json").write_text(json.dumps(record, indent=1) + "\n")
    if args.collect is not None:
        record["collected"] = collect(work, args.collect, text, record)
    print(text, flush=True)
    return record


def _device() -> str:
    try:
        import torch

        if torch.cuda.is_available():
            return f"{torch.cuda.get_device_name(0)}, torch {torch.__version__}, CUDA {torch.version.cuda}"
        return f"CPU, torch {torch.__version__}"
    except ImportError:
        return "?"


if __name__ == "__main__":
    main()
