"""The fidelity runs: the papers' directions on a CPU budget, three seeds each.

Meant to run on an otherwise idle machine, one group after the other (each run uses both cores):

    .venv/bin/python scripts/studies/fidelity_runs.py --list              # groups, runs and estimated CPU time
    .venv/bin/python scripts/studies/fidelity_runs.py --dry-run           # print the commands, run nothing
    .venv/bin/python scripts/studies/fidelity_runs.py                     # every group, in the order listed
    .venv/bin/python scripts/studies/fidelity_runs.py --groups sccl_ablation aecl_forms
    .venv/bin/python scripts/studies/fidelity_runs.py --smoke --out logs/fidelity_smoke   # 2-3 steps each, tiny
    # one seed of a group as its own multirun in <out>/<group>/s1, on a GPU, next to other such parts:
    python scripts/studies/fidelity_runs.py --groups aecl_forms --seeds 1 --part s1 \
        --extra trainer=gpu_fp32 threads_per_job=2
    # a subset of a group's settings (new values for one of its sweep axes):
    python scripts/studies/fidelity_runs.py --groups aecl_forms --only method.reference=true

Each group is ONE Hydra multirun (``run.py -m``) whose runs go to ``<out>/<group>/`` (default
``logs/fidelity``), so ``python tools.py aggregate --runs <out>/<group>`` makes the group's table
(mean ± std over the seeds per setting); the driver calls it after each group when that module
exists. Every group writes ``<out>/<group>/command.txt`` (the exact command) and the driver adds
the group's wall time to ``<out>/timings.json``. A group whose multirun fails stops the driver
(exit status of run.py) unless ``--keep-going``.

Settings are the paper defaults of each method (conf/method/*.yaml, conf/experiment/*.yaml) on
the offline MiniLM at batch 64; only the budget differs from the papers. Nothing here is tuned on
the results.
"""
from __future__ import annotations

import argparse
import importlib.util
import itertools
import json
import re
import shlex
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SEEDS = "1,2,3"

# AECL budget: "epochs" of AECL_BATCHES batches of 64; stage 1 for AECL_E1 epochs, stage 2 for AECL_E2,
# stage 3 for the rest of AECL_EPOCHS. Chosen so that stage 3 has confident pseudo-labels (max p⁰ over
# 0.95): in a frozen-encoder probe of these stages on SearchSnippets (heads at 5e-4, batch 64, seed 1),
# E1=3/E2=1 gave none until ~550 steps into stage 3 (then a sudden jump to ~60 %), while E1=3/E2=5
# left the head fitted to the KMeans labels and stage 3 started with 45-50 % confident samples. The
# paper's E1=10/E2=1 epochs of 31 batches of 400 cannot be matched at batch 64 on a CPU budget.
# Check train/confident_share in each run's csv/metrics.csv: it must be > 0 in stage 3.
AECL_BATCHES = 100
AECL_E1 = 3
AECL_E2 = 5
AECL_EPOCHS = 10
AECL_STEPS = AECL_BATCHES * AECL_EPOCHS

# every run: no progress bar in the logs, and no end-of-run cluster report (its t-SNE plot of up to
# 3000 texts took minutes per run and the tables need only results.json)
QUIET = {"trainer.enable_progress_bar": "false", "~callbacks.progress": None, "~callbacks.report": None}


@dataclass
class Group:
    """One table of the papers' comparisons: a multirun over ``sweep`` (comma lists), on top of ``fixed``."""

    name: str
    question: str
    fixed: dict[str, str | None]  # must compose without the sweep too: a multirun composes that first
    sweep: dict[str, str]
    smoke: dict[str, str | None]  # replaces/extends ``fixed`` for --smoke (tiny backbone, a few steps)
    minutes_per_run: float  # estimated wall minutes of one run on the idle 2-core machine
    sweep_smoke: dict[str, str] = field(default_factory=lambda: {"seed": "1"})

    def swept(self, smoke: bool = False, seeds: str | None = None,
              only: dict[str, str] | None = None) -> dict[str, str]:
        """The multirun's comma lists: ``sweep``, the smoke seed, ``seeds`` replacing the seeds, ``only``
        replacing the values of other axes (a subset of a group's settings, e.g. method.reference=true)."""
        sweep = {**self.sweep, **(self.sweep_smoke if smoke else {})}
        sweep = {**sweep, "seed": seeds} if seeds is not None else sweep
        unknown = sorted(set(only or {}) - set(sweep))
        if unknown:
            raise ValueError(f"--only {unknown[0]}=...: group {self.name} sweeps only over {', '.join(sweep)}")
        return {**sweep, **(only or {})}

    def runs(self, smoke: bool = False, seeds: str | None = None, only: dict[str, str] | None = None) -> int:
        return len(list(itertools.product(*(v.split(",") for v in self.swept(smoke, seeds, only).values()))))

    def overrides(self, out: Path, smoke: bool = False, seeds: str | None = None, part: str | None = None,
                  extra: list[str] = (), only: dict[str, str] | None = None) -> list[str]:
        sweep = self.swept(smoke, seeds, only)
        merged = {**self.fixed, **(self.smoke if smoke else {}), **QUIET, **sweep,
                  "hydra.sweep.dir": str(self.folder(out, part))}
        return [key if value is None else f"{key}={value}" for key, value in merged.items()] + list(extra)

    def folder(self, out: Path, part: str | None = None) -> Path:
        return out / self.name / part if part else out / self.name

    def command(self, out: Path, smoke: bool = False, **kwargs) -> list[str]:
        return [sys.executable, str(ROOT / "run.py"), "-m", *self.overrides(out, smoke, **kwargs)]


# the SCCL recipes read the authors' contextual-substitution files (two views); these CPU comparisons run on
# the shared file with its one EDA column, on the CPU trainer (a GPU run adds --extra trainer=gpu_fp32)
SCCL_ON_SHARED_FILE = {
    "trainer": "cpu",
    "dataset.file": "searchsnippets.csv",
    "dataset.text_column": "text0",
    "dataset.aug_columns": "[text1]",
}
TINY_SHORT_TEXT = {
    "backbone": "tiny",
    "dataset.callbacks.clustering_eval.kmeans_n_init": "1",
}

GROUPS: dict[str, Group] = {
    g.name: g
    for g in [
        Group(
            name="sccl_ablation",
            question="SCCL Table 3 on SearchSnippets: joint training vs Instance-CL only vs clustering only "
            "(paper: both ablations clearly worse than joint). KMeans on the final embeddings; head too.",
            fixed={
                "experiment": "sccl_searchsnippets",
                **SCCL_ON_SHARED_FILE,
                "backbone": "minilm",
                "batch_size": "64",
                "trainer.max_steps": "300",
                "dataset.callbacks.clustering_eval.every_n_steps": "100",
            },
            sweep={"method.objective": "joint,instance,cluster", "seed": SEEDS},
            smoke={**TINY_SHORT_TEXT, "trainer.max_steps": "2", "dataset.callbacks.clustering_eval.every_n_steps": "2",
                   "method.callbacks.centroid_init.n_init": "1"},
            # docs/history/results_2026-11.md: 1,023 s for the 300-step SearchSnippets run with 4 evaluations (idle)
            minutes_per_run=17.0,
        ),
        Group(
            name="clusterns_vs_simcse",
            question="ClusterNS vs SimCSE on the Wikipedia sample, 150 steps: both at 3e-5 and both at 5e-5 "
            "(same rate), and each at its paper rate (SimCSE 3e-5, ClusterNS 5e-5). STS-B dev (best of "
            "the 3 evaluations) and the seven-task average on the best weights (paper: ClusterNS +1.3).",
            fixed={},
            sweep={"experiment": "simcse_minilm_cpu,clusterns_minilm_cpu", "method.lr": "3e-5,5e-5", "seed": SEEDS},
            # ++: a multirun first composes without the swept experiment (method=sccl has no sts_selection)
            smoke={"backbone": "tiny", "trainer.max_steps": "3", "++method.callbacks.sts_selection.every_n_steps": "2"},
            # idle check in docs/history/results_2026-11.md: 160 s for 30 steps + 2 dev evaluations + the final STS
            minutes_per_run=7.0,
        ),
        Group(
            name="pairsupcon_modes",
            question="PairSupCon both objectives vs classification only vs instance discrimination only, 200 "
            "steps on the NLI sample: STS average and KMeans clustering (10 seeds) on AgNews, "
            "SearchSnippets and Tweet (paper: both > each alone, instance-only far better than "
            "classification-only for clustering).",
            fixed={
                "method": "pairsupcon",
                "dataset": "nli",
                "backbone": "minilm",
                "batch_size": "64",
                "trainer.max_steps": "200",
                "method.callbacks.final_eval.tasks": "[clustering]",
                "method.callbacks.final_eval.clustering_datasets": "[agnews,searchsnippets,tweet]",
            },
            sweep={"method.mode": "both,classification,instance", "seed": SEEDS},
            smoke={"backbone": "tiny", "trainer.max_steps": "2", "method.callbacks.final_eval.seeds": "1"},
            # 200 steps (~4 min) + STS (~1 min idle) + clustering of 3 sets x 10 seeds (~4 min)
            minutes_per_run=10.0,
        ),
        Group(
            name="aecl_forms",
            question=f"AECL paper losses vs reference=true (the authors' train.py) on SearchSnippets, "
            f"{AECL_STEPS} steps = {AECL_EPOCHS} epochs of {AECL_BATCHES} batches: stage 1 for {AECL_E1}, "
            f"stage 2 for {AECL_E2}, stage 3 for the rest. Head (prediction) and KMeans ACC/NMI; "
            "train/confident_share says whether stage 3 had confident pseudo-labels.",
            fixed={
                "experiment": "aecl_searchsnippets",
                "trainer": "cpu",  # the recipe's GPU trainer: --extra trainer=gpu_fp32 on a GPU
                "backbone": "minilm",
                "batch_size": "64",
                "method.e1": str(AECL_E1),
                "method.e2": str(AECL_E2),
                "trainer.max_epochs": str(AECL_EPOCHS),
                "trainer.max_steps": "-1",
                "+trainer.limit_train_batches": str(AECL_BATCHES),
                "dataset.callbacks.clustering_eval.every_n_steps": str(2 * AECL_BATCHES),
                "trainer.log_every_n_steps": "5",
            },
            sweep={"method.reference": "false,true", "seed": SEEDS},
            smoke={**TINY_SHORT_TEXT, "method.e1": "1", "method.e2": "1", "trainer.max_epochs": "3",
                   "+trainer.limit_train_batches": "1", "dataset.callbacks.clustering_eval.every_n_steps": "2",
                   "method.callbacks.stage_switch.kmeans_n_init": "1", "trainer.log_every_n_steps": "1"},
            # ~2.3 s a step (two encoder passes of 64, as SCCL) + 5 stage-2 KMeans and 6 evaluations
            minutes_per_run=AECL_STEPS * 2.3 / 60 + 8,
        ),
        Group(
            name="sccl_at_aecl_budget",
            question=f"SCCL at AECL's budget ({AECL_STEPS} steps, the same epochs of {AECL_BATCHES} batches): "
            "the AECL-vs-SCCL table with aecl_forms (paper: AECL 80.58/69.27 vs SCCL 79.90/63.78 "
            "ACC/NMI on SearchSnippets, after 70 epochs at batch 400).",
            fixed={
                "experiment": "sccl_searchsnippets",
                **SCCL_ON_SHARED_FILE,
                "backbone": "minilm",
                "batch_size": "64",
                "trainer.max_epochs": str(AECL_EPOCHS),
                "trainer.max_steps": "-1",
                "+trainer.limit_train_batches": str(AECL_BATCHES),
                "dataset.callbacks.clustering_eval.every_n_steps": str(2 * AECL_BATCHES),
            },
            sweep={"seed": SEEDS},
            smoke={**TINY_SHORT_TEXT, "trainer.max_epochs": "2", "+trainer.limit_train_batches": "1",
                   "dataset.callbacks.clustering_eval.every_n_steps": "2",
                   "method.callbacks.centroid_init.n_init": "1"},
            minutes_per_run=AECL_STEPS * 2.3 / 60 + 6,
        ),
    ]
}


def estimate(groups: list[Group]) -> list[tuple[str, int, float]]:
    """(group, runs, estimated hours) for each group."""
    return [(g.name, g.runs(), g.runs() * g.minutes_per_run / 60) for g in groups]


def aggregate(folder: Path) -> int | None:
    if importlib.util.find_spec("ctclust.commands.aggregate") is None:
        print(f"ctclust.commands.aggregate is not there yet: make the table later with "
              f"`python tools.py aggregate --runs {folder}`", flush=True)
        return None
    return subprocess.call([sys.executable, "-m", "ctclust.commands.aggregate", "--runs", str(folder)], cwd=ROOT)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--groups", nargs="+", choices=list(GROUPS), default=list(GROUPS))
    parser.add_argument("--out", type=Path, default=ROOT / "logs" / "fidelity", help="sweep folders go here")
    parser.add_argument("--list", action="store_true", help="list the groups and the time estimate, run nothing")
    parser.add_argument("--dry-run", action="store_true", help="print the commands, run nothing")
    parser.add_argument("--smoke", action="store_true", help="tiny backbone, 2-3 steps, one seed: checks that "
                        "every command composes and runs")
    parser.add_argument("--keep-going", action="store_true", help="go on with the next group after a failure")
    parser.add_argument("--seeds", help="comma list replacing the seeds 1,2,3 of every group (e.g. 2)")
    parser.add_argument("--part", help="sweep folder <out>/<group>/<part> instead of <out>/<group>, for a group "
                        "split over several processes (the aggregate of <out>/<group> reads every part)")
    parser.add_argument("--only", nargs="+", default=[], metavar="KEY=VALUES",
                        help="run a subset of a group's settings: new values for one of its sweep axes, e.g. "
                        "method.reference=true")
    parser.add_argument("--extra", nargs="+", default=[], metavar="KEY=VALUE",
                        help="overrides added to every run, e.g. trainer=gpu_fp32 threads_per_job=2")
    args = parser.parse_args(argv)
    if args.seeds is not None and not re.fullmatch(r"\d+(,\d+)*", args.seeds):
        parser.error(f"--seeds {args.seeds!r}: give integers separated by commas, e.g. 1,2,3")
    only = {}
    for item in args.only:
        key, sep, values = item.partition("=")
        if not sep or not key or not values:
            parser.error(f"--only {item!r}: give KEY=VALUES, e.g. method.reference=true")
        only[key] = values
    groups = [GROUPS[name] for name in args.groups]
    for group in groups:
        try:
            group.swept(args.smoke, args.seeds, only)
        except ValueError as error:
            parser.error(str(error))
    sys.path.insert(0, str(ROOT))

    if args.list:
        total = 0.0
        for name, runs, hours in estimate(groups):
            total += hours
            print(f"{name:22s} {runs:3d} runs  ~{hours:4.1f} h   {GROUPS[name].question}")
        print(f"{'total':22s}           ~{total:4.1f} h (estimates for an idle 2-core machine)")
        return 0

    out = args.out.resolve()
    for group in groups:
        command = group.command(out, args.smoke, seeds=args.seeds, part=args.part, extra=args.extra, only=only)
        printable = shlex.join(command)
        print(f"\n== {group.name}: {group.runs(args.smoke, args.seeds, only)} runs\n{printable}", flush=True)
        if args.dry_run:
            continue
        folder = group.folder(out, args.part)
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "command.txt").write_text(printable + "\n")
        start = time.time()
        status = subprocess.call(command, cwd=ROOT)
        seconds = time.time() - start
        # parts of one group run side by side: each keeps its own timing file
        timings_path = folder / "timings.json" if args.part else out / "timings.json"
        timings = json.loads(timings_path.read_text()) if timings_path.exists() else {}
        timings[group.name] = {"seconds": round(seconds, 1), "runs": group.runs(args.smoke, args.seeds, only),
                               "status": status, "part": args.part, "extra": args.extra,
                               "smoke": args.smoke, "finished": time.strftime("%Y-%m-%d %H:%M:%S")}
        timings_path.write_text(json.dumps(timings, indent=2) + "\n")
        print(f"== {group.name}: exit {status} after {seconds / 60:.1f} min", flush=True)
        if status != 0:
            if not args.keep_going:
                return status
            continue
        aggregate(folder)
    return 0


if __name__ == "__main__":
    sys.exit(main())
