"""One command per paper table: check the data, launch every row x seed, print the table beside the paper's.

    python tools.py reproduce sccl_table1 [--seeds 0,1,2] [--rows sccl_agnews,...] \
        [--launcher local|slurm] [--runs-per-gpu N [--run-memory-gib G]] [--precision fp32|tf32|bf16]
        [--output logs/reproduce/<table>] [--dry-run] [overrides ...]

The rows are the experiments that the table's trained rows name (``evaluation/across_runs/paper_tables/<table>.yaml``:
each row's ``command`` with its datasets filled in); rows of untrained baselines (``evaluate_model``) are
listed with their commands. Every experiment x seed runs in ``<out>/<experiment>/seed_<seed>/`` through
Hydra's multirun (``hydra/launcher=slurm`` with ``--launcher slurm``: one SLURM job per run). A run whose
results.json says it finished is skipped; one that was interrupted (``checkpoints/last.ckpt`` there) is
resumed from it. At the end ``evaluation.across_runs.paper_table`` compares the runs under ``<out>`` with the paper
(mean ± std over seeds, difference) and writes ``<out>/paper_table.md``.

Before anything runs, the data each experiment reads is checked; a missing file stops the command with one
line per file naming its download. ``--dry-run`` lists the runs, their commands, their data files (present
or missing) and the GPU hours that the benchmarks' GPU figures imply (``launching.gpu_figures``; "unknown" where
there is no figure).
Paper rows train on their corpora: ``dataset.sample=true`` is refused here.

``--runs-per-gpu N`` runs N runs side by side on every GPU (the host's CPUs when there is none), each run its own
``python run.py`` process pinned to one GPU (``CUDA_VISIBLE_DEVICES``) with its share of the cores
(``threads_per_job``), a queue keeping every slot busy across rows and seeds; nothing starts unless N runs fit into
each GPU's free memory (launching.packing: a run's memory measured, ``--run-memory-gib``, or
estimated). Each run's console output goes to ``<out>/launch/<experiment>_seed_<seed>.log``, the wall times to
``<out>/packing.json`` (runs finished per hour). ``--precision`` trains every run in float32 (``fp32``, the papers'),
float32 with TF32 matrix products (``tf32``) or bf16 autocast (``bf16``); the table says which.
"""
from __future__ import annotations

import json
import math
import os
import re
import shlex
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

from omegaconf import DictConfig, OmegaConf

from evaluation.across_runs import paper_table
from launching.gpu_figures import gpu_figures
from textcore import run_folder
from textcore.checkout import ROOT
from textcore.errors import USER_ERROR_EXIT_CODE, ConfigError

os.environ.setdefault("PROJECT_ROOT", str(ROOT))  # conf/paths/default.yaml reads it
# the GPU figures name the method (ClusterNS on BERT-large has a row of its own)
BENCH_METHOD = {("clusterns", "bert-large"): "clusterns_large"}
PRECISION = {"16-mixed": "fp16", "bf16-mixed": "bf16", "32-true": "fp32", "32": "fp32"}
# --precision: the run.py overrides of each (trainer.precision keeps the run's trainer group: gpu_fp32, cpu, ...)
TRAINING_PRECISIONS = {
    "fp32": ["++trainer.precision=32-true", "float32_matmul_precision=highest"],
    "tf32": ["++trainer.precision=32-true", "float32_matmul_precision=high"],
    "bf16": ["++trainer.precision=bf16-mixed"],
}
# every run of a table, unless --plots: the report's figures cost 27 s a run on an H200 node (BENCHMARKS.md, "GPU
# session"), 11 minutes of SCCL's Table 1, and a table needs none; `tools.py plots --run <folder>` draws them later
TABLE_RUN_SETTINGS = ["callbacks.report.plots=false"]


@dataclass
class Run:
    """One experiment of the table, with its seeds and what each needs."""

    experiment: str
    rows: list[str]
    cfg: DictConfig
    files: list[tuple[Path, str | None]] = field(default_factory=list)   # (path, download command or None)
    done: list[int] = field(default_factory=list)
    resume: dict[int, tuple[Path, bool]] = field(default_factory=dict)   # seed -> (checkpoint, training finished)
    fresh: list[int] = field(default_factory=list)


def experiments_of(table: dict) -> tuple[dict[str, list[str]], list[str]]:
    """{experiment: the table rows it serves} of the trained rows, and the commands of the untrained ones."""
    experiments: dict[str, list[str]] = {}
    baselines: list[str] = []
    for row in table["rows"]:
        for dataset in row["values"]:
            command = row["command"].format(dataset=dataset)
            if row["source"] == "evaluate_model":
                baselines.append(f"{row['name']}, {dataset}: {command}")
                continue
            found = re.search(r"experiment=(\S+)", command)
            if not found:
                raise ConfigError(f"paper table row {row['name']!r}: its command names no experiment=<name> "
                                  f"({command}); launching.reproduce launches experiments.")
            experiments.setdefault(found.group(1), [])
            label = f"{row['name']}, {dataset}"
            if label not in experiments[found.group(1)]:
                experiments[found.group(1)].append(label)
    return experiments, baselines


def compose(experiment: str, overrides: Sequence[str]) -> DictConfig:
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra

    GlobalHydra.instance().clear()
    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base="1.3"):
        return hydra_compose(config_name="config", overrides=[f"experiment={experiment}", *overrides])


def data_files(cfg: DictConfig) -> list[tuple[Path, str | None]]:
    """The corpus the run reads and, for methods evaluated on STS / SentEval, ``sts_data_dir``; each with the
    download command of its catalogue item (None for a file of the user's own)."""
    from datamodules.download import catalogue
    from validation import corpus_path

    files: list[tuple[Path, str | None]] = []
    corpus, _ = corpus_path(cfg)
    if corpus is not None:
        item = catalogue.for_file(corpus)
        files.append((corpus, catalogue.download_command(item, catalogue.dest_of(corpus, item)) if item else None))
    sts = Path(str(cfg.sts_data_dir))
    callbacks = OmegaConf.to_container(cfg.method.get("callbacks") or {}, resolve=False)
    if "${sts_data_dir}" in json.dumps(callbacks):
        item = catalogue.BY_NAME["senteval"]
        files.append((sts, catalogue.download_command(item, catalogue.dest_of(sts, item))))
    final = OmegaConf.select(cfg, "method.callbacks.final_eval")
    if final is not None and "clustering" in (final.get("tasks") or []):  # PairSupCon's Table 1 is this evaluation
        folder = Path(str(final.short_text_dir))
        for name in final.get("clustering_datasets") or catalogue.SHORT_TEXT_SETS:
            item = catalogue.BY_NAME.get(name)
            path = folder / f"{name}.csv"
            files.append((path, catalogue.download_command(item, catalogue.dest_of(path, item)) if item else None))
    return files


def run_state(folder: Path) -> tuple[str, Path | None, bool]:
    """("done" | "resume" | "fresh", the checkpoint to resume from, whether training had finished)."""
    run = run_folder.RunFolder(folder)
    checkpoint = run.checkpoint_path()
    try:
        info = run.results()
    except run_folder.RunFileError:
        info = {}
    info = info or {}
    if info and info.get("status", "finished") == "finished" and "method" in info:
        return "done", None, False
    if checkpoint.is_file():
        return "resume", checkpoint, bool(info.get("training_finished"))
    return "fresh", None, False


def launch_commands(run: Run, out: Path, launcher: str, overrides: Sequence[str]) -> list[list[str]]:
    base = [sys.executable, "run.py", "--multirun", f"experiment={run.experiment}",
            f"hydra.sweep.dir={relative_to_repo(out / run.experiment)}", "hydra.sweep.subdir=seed_${seed}"]
    if launcher == "slurm":
        base.append("hydra/launcher=slurm")
    commands = []
    if run.fresh:
        commands.append(base + [f"seed={','.join(map(str, run.fresh))}", *overrides])
    for seed, (checkpoint, finished) in sorted(run.resume.items()):
        extra = ["eval_only=true"] if finished else []
        commands.append(base + [f"seed={seed}", f"ckpt_path={checkpoint}", *extra, *overrides])
    return commands


def packed_commands(run: Run, out: Path, overrides: Sequence[str], threads: int) -> list[tuple[int, list[str]]]:
    """(seed, command) of each run of ``run`` to start or resume, one ``run.py`` process each (``--runs-per-gpu``):
    the folder is the one the multirun gives (``<out>/<experiment>/seed_<seed>``)."""
    commands = []
    for seed in sorted([*run.fresh, *run.resume]):
        extra = []
        if seed in run.resume:
            checkpoint, finished = run.resume[seed]
            extra = [f"ckpt_path={checkpoint}", *(["eval_only=true"] if finished else [])]
        commands.append((seed, [sys.executable, "run.py", f"experiment={run.experiment}", f"seed={seed}",
                                f"hydra.run.dir={relative_to_repo(out / run.experiment / f'seed_{seed}')}",
                                f"threads_per_job={threads}", *extra, *overrides]))
    return commands


def launch_packed(jobs: list[tuple[str, int, list[str]]], slot_list: list, out: Path) -> tuple[list[str], dict]:
    """Runs ``jobs`` ((experiment, seed, command)) with one process per slot, each slot taking the next job when its
    run ends; returns the failed experiments and the record written to ``<out>/packing.json``."""
    logs = out / "launch"
    logs.mkdir(parents=True, exist_ok=True)
    queue, running, finished, failed = list(jobs), {}, [], []
    free = list(slot_list)
    began = time.perf_counter()
    while queue or running:
        while queue and free:
            experiment, seed, command = queue.pop(0)
            slot = free.pop(0)
            log = logs / f"{experiment}_seed_{seed}.log"
            env = {**os.environ, **slot.environment(), "PROJECT_ROOT": str(ROOT)}
            pinned = " ".join(f"{k}={v}" for k, v in slot.environment().items())
            typed = " ".join(shlex.quote(part) for part in ["python", *command[1:]])
            print(f"$ {pinned + ' ' if pinned else ''}{typed}  > {relative_to_repo(log)}", flush=True)
            handle = log.open("w")
            process = subprocess.Popen(command, cwd=ROOT, env=env, stdout=handle, stderr=subprocess.STDOUT)
            running[process] = (experiment, seed, slot, time.perf_counter(), handle, log)
        time.sleep(0.2)
        for process in [p for p in running if p.poll() is not None]:
            experiment, seed, slot, start, handle, log = running.pop(process)
            handle.close()
            free.insert(0, slot)
            seconds = time.perf_counter() - start
            finished.append({"experiment": experiment, "seed": seed, "device": slot.device.label,
                             "place": slot.place, "started": round(start - began, 1),
                             "ended": round(start - began + seconds, 1), "seconds": round(seconds, 1),
                             "returncode": process.returncode})
            if process.returncode != 0:
                failed.append(experiment)
                print(f"failed: {experiment} seed {seed} (exit {process.returncode}) after {seconds:.0f} s; "
                      f"its output: {relative_to_repo(log)}", flush=True)
            else:
                print(f"finished: {experiment} seed {seed} in {seconds:.0f} s on {slot.device.label}", flush=True)
    wall = time.perf_counter() - began
    done = sum(1 for f in finished if f["returncode"] == 0)
    record = {"runs_per_device": len(slot_list) // max(1, len({s.device for s in slot_list})),
              "devices": sorted({s.device.label for s in slot_list}), "wall_seconds": round(wall, 1),
              "runs_finished": done, "runs_per_hour": round(3600 * done / wall, 2) if wall > 0 else None,
              "runs": finished}
    return failed, record


def packing_plan(runs: list[Run], launcher: str, runs_per_gpu: int, run_memory_gib: float | None,
                 overrides: Sequence[str]) -> list:
    """The slots of ``--runs-per-gpu``, after checking that that many runs fit into every device's memory."""
    from launching import packing

    if launcher != "local":
        raise ConfigError(f"--runs-per-gpu applies to the local launcher; with --launcher {launcher} every run is "
                          "a job of its own (set the job's resources there)")
    use_gpu = not any(o.split("=", 1)[0].lstrip("+") == "trainer" and o.endswith("=cpu") for o in overrides)
    found = packing.devices(use_gpu)
    on_gpu = found[0].index is not None
    bench = gpu_figures()
    for run in [r for r in runs if r.fresh or r.resume]:  # finished rows need no room
        if run_memory_gib is not None:
            run_gib, source = run_memory_gib, "--run-memory-gib"
        else:
            run_gib, source = packing.estimate_run_gib(run.cfg, bench, on_gpu)
        if run_gib is None:
            raise ConfigError(f"--runs-per-gpu {runs_per_gpu}: no memory figure for {run.experiment} ({source}); "
                              "give --run-memory-gib <GiB> measured for one run (its peak in nvidia-smi)")
        print(f"memory: {run.experiment}: {run_gib:.1f} GiB a run ({source}); {runs_per_gpu} a device on "
              + ", ".join(f"{d.label} with {d.free_gib:.1f} GiB free" for d in found), flush=True)
        packing.check_fits(found, runs_per_gpu, run_gib, source)
    return packing.slots(found, runs_per_gpu)


# -- GPU hours from the benchmarks' GPU figures -----------------------------------------------------------
def training_steps(cfg: DictConfig) -> int | None:
    from datamodules.download import catalogue
    from validation import corpus_path

    max_steps = int(OmegaConf.select(cfg, "trainer.max_steps", default=-1) or -1)
    if max_steps > 0:
        return max_steps
    epochs = int(OmegaConf.select(cfg, "trainer.max_epochs", default=-1) or -1)
    corpus, _ = corpus_path(cfg)
    item = catalogue.for_file(corpus) if corpus is not None else None
    while item is not None and item.rows is None and item.inputs:
        item = catalogue.BY_NAME[item.inputs[0]]
    if epochs <= 0 or item is None or item.rows is None:
        return None
    return epochs * math.ceil(item.rows / int(cfg.batch_size))


def gpu_hours(cfg: DictConfig, rows: list[dict]) -> tuple[float | None, str]:
    """Training hours per run on the card of the GPU figures (evaluation not counted), and why if unknown."""
    backbone = str(cfg.backbone.name).split("/")[-1]
    arch = next((a for a in ("distilbert-base", "bert-large", "bert-base") if backbone.startswith(a)), None)
    method = BENCH_METHOD.get((str(cfg.method.name), arch), str(cfg.method.name))
    precision = PRECISION.get(str(OmegaConf.select(cfg, "trainer.precision", default="",
                                                   throw_on_resolution_failure=False)))  # ${gpu_precision:}: by card
    chunk, cached = cfg.get("encoder_chunk_tokens"), int(cfg.get("encoder_grad_cache_tokens") or 0)
    candidates = [r for r in rows if r["method"] == method and r["arch"] == arch
                  and r["batch"] == int(cfg.batch_size) and r["precision"] == precision
                  and r["cached"] == (str(cached) if cached else "-")
                  and (chunk is None or r["chunk"] == (str(chunk) if chunk else "-"))]
    # end to end (the loader and the loop included) first; a null chunk setting is chosen per device at run
    # time, where a GPU without a memory limit runs unchunked
    candidates.sort(key=lambda r: (not r["end_to_end"], r["chunk"] != "-"))
    match = candidates[0] if candidates else None
    steps = training_steps(cfg)
    if match is None:
        return None, (f"no GPU figure in BENCHMARKS.md for {method}, {backbone}, batch {cfg.batch_size}, "
                      f"{precision or 'the GPU precision chosen at run time'}")
    if steps is None:
        return None, "the number of steps depends on a corpus of unknown size"
    return steps / match["steps_per_s"] / 3600, f"{steps} steps at {match['steps_per_s']:.2f} steps/s"


# -- the command ------------------------------------------------------------------------------------
def relative_to_repo(path: Path) -> str:
    """``path`` as the user reads it: relative to the repository when inside it."""
    try:
        return str(path.resolve().relative_to(ROOT))
    except ValueError:
        return str(path)


def plan(table_name: str, seeds: list[int], only: list[str] | None, out: Path,
         overrides: Sequence[str]) -> tuple[dict, list[Run], list[str]]:
    if any(re.match(r"^\+*dataset\.sample=(true|True|1)$", o) for o in overrides):
        raise ConfigError("dataset.sample=true: a paper table compares runs on the papers' corpora, and "
                          "evaluation.across_runs.paper_table leaves sample runs out; run a sample with "
                          "`python run.py experiment=<row> dataset.sample=true` instead.")
    table = paper_table.load_table(table_name)
    experiments, baselines = experiments_of(table)
    if only:
        unknown = [name for name in only if name not in experiments]
        if unknown:
            raise ConfigError(f"--rows {','.join(unknown)}: not a row of {table_name}; its rows: "
                              f"{', '.join(experiments)}")
        experiments = {name: experiments[name] for name in only}
    runs = []
    for experiment, rows in experiments.items():
        cfg = compose(experiment, overrides)
        run = Run(experiment, rows, cfg, data_files(cfg))
        for seed in seeds:
            state, checkpoint, finished = run_state(out / experiment / f"seed_{seed}")
            if state == "done":
                run.done.append(seed)
            elif state == "resume":
                run.resume[seed] = (checkpoint, finished)
            else:
                run.fresh.append(seed)
        runs.append(run)
    return table, runs, baselines


def describe(table_name: str, table: dict, runs: list[Run], baselines: list[str], seeds: list[int], out: Path,
             launcher: str, overrides: Sequence[str], packed_threads: int | None = None) -> str:
    bench = gpu_figures()
    total = len(runs) * len(seeds)
    lines = [f"{table_name}: {table['paper']}, {table['table']}: {len(runs)} rows x {len(seeds)} seeds = {total} runs "
             f"into {relative_to_repo(out)}", ""]
    hours_known, unknown = 0.0, 0
    for run in runs:
        hours, why = gpu_hours(run.cfg, bench)
        to_run = len(run.fresh) + len(run.resume)
        if hours is None:
            unknown += to_run
        else:
            hours_known += hours * to_run
        lines.append(f"{run.experiment} ({'; '.join(run.rows)})")
        lines.append(f"  seeds: {len(run.done)} finished, {len(run.resume)} to resume, {len(run.fresh)} to start")
        for path, command in run.files:
            state = "present" if path.exists() else "MISSING"
            fetch = f"  ({command})" if command and state != "present" else ""
            lines.append(f"  data: {state:<7} {relative_to_repo(path)}{fetch}")
        gpu = f"{hours:.2f} GPU hours per run ({why})" if hours is not None else f"unknown ({why})"
        lines.append(f"  estimate: {gpu}")
        commands = (launch_commands(run, out, launcher, overrides) if packed_threads is None else
                    [command for _, command in packed_commands(run, out, overrides, packed_threads)])
        for command in commands:
            lines.append("  $ " + " ".join(shlex.quote(part) for part in ["python", *command[1:]]))
        lines.append("")
    known = f"{hours_known:.1f} GPU hours for the runs with a figure" if unknown < total else "no GPU figure"
    lines.append(f"estimate: {known}; {unknown} run(s) without one (BENCHMARKS.md's GPU section, "
                 "`bash scripts/bench/gpu_node.sh` on the card)")
    if baselines:  # their JSON under <out> is read with the runs' results
        lines += ["", "untrained rows (not launched; run these, the table reads what they write):"]
        lines += [f"  {line} --output {relative_to_repo(out / 'baselines')}" for line in baselines]
    return "\n".join(lines)


def reproduce(table_name: str, seeds: Sequence[int] = (0, 1, 2), rows: str | None = None, launcher: str = "local",
              output: Path | None = None, dry_run: bool = False, runs_per_gpu: int | None = None,
              run_memory_gib: float | None = None, precision: str | None = None, overrides: Sequence[str] = (),
              plots: bool = False) -> str:
    """``python tools.py reproduce`` (ctclust.commands.reproduce): the plan of ``table_name``'s rows x ``seeds``
    printed; unless ``dry_run``, the data checked, every run launched, the table beside the paper's written."""
    seeds = list(seeds)
    out = (output or ROOT / "logs" / "reproduce" / Path(table_name).stem).resolve()
    only = [r.strip() for r in rows.split(",") if r.strip()] if rows else None
    # the command line's last: it wins
    overrides = [*([] if plots else TABLE_RUN_SETTINGS), *TRAINING_PRECISIONS.get(precision, []), *overrides]
    table, runs, baselines = plan(table_name, seeds, only, out, overrides)
    threads = None
    if runs_per_gpu is not None:
        from textcore.device_settings import usable_cores

        # refuses before anything runs when they do not fit
        slot_list = packing_plan(runs, launcher, runs_per_gpu, run_memory_gib, overrides)
        threads = max(1, usable_cores() // len(slot_list))  # each run its share of the cores
    text = describe(table_name, table, runs, baselines, seeds, out, launcher, overrides, threads)
    print(text, flush=True)
    if dry_run:
        return text
    missing = [(path, command) for run in runs for path, command in run.files if not path.exists()]
    for path, command in dict.fromkeys(missing):
        how = f"get it with `{command}`" if command else "point the run at the file (data_dir=, dataset.file=)"
        print(f"error: {path} is missing; {how}", file=sys.stderr, flush=True)
    if missing:
        sys.exit(USER_ERROR_EXIT_CODE)
    failed = []
    if runs_per_gpu is not None:
        jobs = [(run.experiment, seed, command) for run in runs
                for seed, command in packed_commands(run, out, overrides, threads)]
        failed, record = launch_packed(jobs, slot_list, out)
        if jobs:
            (out / "packing.json").write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")
            print(f"packing: {record['runs_finished']} runs in {record['wall_seconds']:.0f} s, "
                  f"{runs_per_gpu} a device: {record['runs_per_hour']} runs per hour", flush=True)
    for run in runs if runs_per_gpu is None else []:
        for command in launch_commands(run, out, launcher, overrides):
            print("$ " + " ".join(shlex.quote(part) for part in ["python", *command[1:]]), flush=True)
            if subprocess.run(command, cwd=ROOT).returncode != 0:
                failed.append(run.experiment)
    runs_found, evaluations = paper_table.find_results(out)
    result = paper_table.markdown(table, paper_table.compare(table, runs_found, evaluations))
    if precision:
        result += (f"\n\nTrained in {precision} (`--precision {precision}`: "
                   f"{' '.join(TRAINING_PRECISIONS[precision])}).\n")
    (out / "paper_table.md").parent.mkdir(parents=True, exist_ok=True)
    (out / "paper_table.md").write_text(result, encoding="utf-8")
    print(result)
    print(f"table: {relative_to_repo(out / 'paper_table.md')}")
    if failed:
        print(f"error: runs of {', '.join(dict.fromkeys(failed))} failed (their folders hold {run_folder.FAILED} / "
              f"{run_folder.RESULTS}); run the same command again to retry them", file=sys.stderr)
        sys.exit(1)
    return result

