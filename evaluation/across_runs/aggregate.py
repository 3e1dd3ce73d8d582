"""One table from many runs: mean ± std over seeds, datasets as columns, methods/variants as rows.

    python tools.py aggregate --runs logs/train/multiruns/<time>                # a multirun folder
    python tools.py aggregate --runs <run dir> <run dir> ... --output tables/  # any run folders

Runs are grouped by everything in their configuration that differs except the seed: each run's
``config_resolved.yaml`` (else Hydra's ``.hydra/config.yaml``) is flattened, and a key joins a
row's label when it takes different values among runs of the same method on the same dataset.
Seed keys (any key named ``*seed*``), paths (``*_dir``, ``paths.*``, ...) and console/logging keys
never split a group; keys that only follow the dataset (per-dataset settings of an experiment,
``num_clusters``) stay out of the labels. A label reads like the overrides that made it, e.g.
``sccl · method.temperature=0.2``.

Tables (numbers x100, **mean ± sample standard deviation (ddof=1)** over the seeds of a cell):

- clustering: ACC/NMI and ARI/AMI of the **final** step per dataset and their average over
  datasets, one row per method variant and predictions (``KMeans`` on the embeddings, the
  cluster ``head``); PairSupCon-style runs that cluster the benchmarks after training
  (``final_evaluation``) add a row whose cell value per run is its mean over KMeans seeds;
- STS: the seven tasks (STS12-16, STS-B, SICK-R) and their average, plus the STS-B dev score
  the run was selected or tuned on.

Runs without results (failed, killed, still running, or stopped early with a partial results.json) are
listed with the first line of the reason, never dropped silently, and none of their numbers enter the tables.
Writes ``aggregate.md``, ``aggregate.csv`` (one line per cell and metric) and ``aggregate.json`` into
``--output`` (default: the folder given, when it is one multirun folder).
"""
from __future__ import annotations

import csv
import json
import os
import re
import statistics
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Sequence

from evaluation.benchmarks.clustering_tasks import BENCHMARKS, SHORT_NAMES
from evaluation.clustering import catalogue
from textcore import run_folder
from textcore.atomic_files import atomic_open, atomic_write_text
from textcore.errors import UserError
from textcore.run_folder import is_finite_number

STS_TASKS = ("STS12", "STS13", "STS14", "STS15", "STS16", "STSB", "SICKR")
STD_NOTE = "mean ± sample standard deviation (ddof=1) over seeds"
OUTPUT_NAMES = ("aggregate.md", "aggregate.csv", "aggregate.json")
# configuration keys that never distinguish runs (where they write, how they print, seeds)
IGNORED_TOP = {"paths", "logger", "hydra", "print_table", "threads_per_job", "objective", "task_name", "ckpt_path",
               "trust_checkpoint"}
IGNORED_LAST = {"output_dir", "save_dir", "dirpath", "checkpoint", "print_table", "enable_progress_bar",
                "enable_model_summary", "log_every_n_steps", "submitit_folder", "path", "file"}
IGNORED_PREFIXES = ("callbacks.progress",)


@dataclass
class Run:
    """One run folder: its flattened configuration, results (None if absent) and why not."""

    path: Path
    config: dict = field(default_factory=dict)
    results: dict | None = None
    failure: str | None = None
    evaluation: dict | None = None  # evaluation.json (final_evaluation's full output)

    @property
    def method(self) -> str:
        return str((self.results or {}).get("method") or self.config.get("method.name", "?"))

    @property
    def dataset(self) -> str:
        value = (self.results or {}).get("dataset") or self.config.get("dataset.name", "?")
        return str(value)

    @property
    def seed(self):
        return (self.results or {}).get("seed", self.config.get("seed"))

    @property
    def job_num(self) -> int | None:
        match = re.match(r"(\d+)_", self.path.name)
        return int(match.group(1)) if match else (int(self.path.name) if self.path.name.isdigit() else None)


# -- reading runs ---------------------------------------------------------------------------------------
def flatten(node, prefix: str = "") -> dict:
    """Nested dicts to ``{"a.b.c": value}``; lists become their JSON text (comparable, hashable)."""
    flat = {}
    if isinstance(node, dict):
        for key, value in node.items():
            flat.update(flatten(value, f"{prefix}{key}."))
    else:
        flat[prefix[:-1]] = json.dumps(node) if isinstance(node, (list, tuple)) else node
    return flat


def load_run(path: Path) -> Run:
    from omegaconf import OmegaConf

    run = Run(path=Path(path))
    folder = run_folder.RunFolder(run.path)
    for name in (run_folder.CONFIG, f"{run_folder.HYDRA}/config.yaml"):
        cfg = folder.config(name)
        if cfg is not None:
            run.config = flatten(OmegaConf.to_container(cfg, resolve=False) or {})
            break
    try:
        run.results = folder.results()
    except run_folder.RunFileError as err:
        run.failure = f"{run_folder.RESULTS} unreadable ({err})"
    try:
        failed = folder.json(run_folder.FAILED)
    except run_folder.RunFileError:
        run.failure = f"failed ({run_folder.FAILED} unreadable)"
    else:
        if failed is not None:
            run.failure = failed.get("error") or "failed"
        elif isinstance(run.results, dict) and run.results.get("status", "finished") != "finished":
            run.failure = stopped_reason(run.results)  # the partial results of a run that stopped early
    if run.results is None and run.failure is None:
        run.failure = f"no {run_folder.RESULTS} (still running, killed, or crashed before the end; see its log)"
    run.evaluation = folder.json(run_folder.EVALUATION)
    return run


def first_line(text) -> str:
    """The first line of an error message: what a table row shows (the whole message is in failed.json)."""
    lines = str(text).strip().splitlines()
    return lines[0] if lines else str(text)


def stopped_reason(results: dict) -> str:
    """Why a partial results.json's run stopped: its status and the first line of its error (or its signal)."""
    status = results.get("status")
    detail = results.get("error") or (f"{results['signal']} at step {results.get('interrupted_at_step')}"
                                      if results.get("signal") else "")
    return f"{status}: {first_line(detail)}" if detail else str(status)


# -- grouping ---------------------------------------------------------------------------------------------
def ignored_key(key: str) -> bool:
    parts = key.split(".")
    last = parts[-1]
    return (
        parts[0] in IGNORED_TOP
        or "seed" in last
        or last in IGNORED_LAST
        or last.endswith("_dir")
        or key.startswith(IGNORED_PREFIXES)
    )


def variant_keys(runs: Sequence[Run]) -> dict[str, list[str]]:
    """Per method, the config keys that vary among its runs on one dataset (seeds and paths aside)."""
    cells: dict[tuple[str, str], list[Run]] = {}
    for run in runs:
        if run.config:
            cells.setdefault((run.method, run.dataset), []).append(run)
    keys: dict[str, list[str]] = {}
    for (method, _), members in cells.items():
        names = sorted({k for r in members for k in r.config if not ignored_key(k)})
        varying = [k for k in names if len({repr(r.config.get(k, "<absent>")) for r in members}) > 1]
        keys[method] = sorted(set(keys.get(method, [])) | set(varying))
    return keys


def short_value(value) -> str:
    """A config value as a table shows it: 4 significant digits for floats, null for None."""
    if value is None:
        return "null"
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


def run_group(run: Run, keys: dict[str, list[str]]) -> tuple:
    """What makes a row: the method and its varying keys' exact values."""
    return (run.method, *((k, repr(run.config.get(k, "<absent>"))) for k in keys.get(run.method, [])))


def run_label(run: Run, keys: dict[str, list[str]], exact: bool = False) -> str:
    """``method · key=value, ...`` (floats to 4 significant digits unless ``exact``)."""
    show = str if exact else short_value
    parts = [f"{k}={show(run.config.get(k, '<absent>'))}" for k in keys.get(run.method, [])]
    return run.method + (" · " + ", ".join(parts) if parts else "")


def group_labels(runs: Sequence[Run], keys: dict[str, list[str]]) -> dict[tuple, str]:
    """A label per group; groups whose short labels collide get the exact values."""
    groups: dict[tuple, Run] = {}
    for run in runs:
        groups.setdefault(run_group(run, keys), run)
    short = {g: run_label(r, keys) for g, r in groups.items()}
    clashes = {label for label in short.values() if list(short.values()).count(label) > 1}
    return {g: (run_label(groups[g], keys, exact=True) if short[g] in clashes else short[g]) for g in groups}


# -- statistics ---------------------------------------------------------------------------------------------
def cell_stats(values: Sequence[float], seeds: Sequence) -> dict:
    """x100 mean and sample std (None for one value), with n and the seeds."""
    scaled = [100 * float(v) for v in values]
    mean = statistics.fmean(scaled)
    std = statistics.stdev(scaled) if len(scaled) > 1 else None
    return {"mean": mean, "std": std, "n": len(scaled), "seeds": list(seeds)}


def clustering_values(run: Run) -> list[tuple[str, str, dict]]:
    """(source, dataset, {metric: fraction}) for every clustering result of a run."""
    out = []
    final = ((run.results or {}).get("clustering") or {}).get("final") or {}
    for source, prefix in (("KMeans", "kmeans"), ("head", "head")):
        scores = {m: final[f"{prefix}_{m}"] for m in catalogue.label_names()
                  if is_finite_number(final.get(f"{prefix}_{m}"))}
        if scores:
            out.append((source, run.dataset, scores))
    evaluation = (run.evaluation or {}).get("clustering") or {}
    seeds = len(evaluation.get("seeds") or [])
    for dataset, scores in (evaluation.get("datasets") or {}).items():
        metrics = {m: scores[m] for m in catalogue.label_names() if is_finite_number(scores.get(m))}
        if metrics:
            out.append((f"KMeans, mean of {seeds} seeds" if seeds else "KMeans", dataset, metrics))
    return out


def sts_values(run: Run) -> dict | None:
    sts = (run.results or {}).get("sts")
    if not sts or not isinstance(sts.get("spearman"), dict):
        return None
    values = {t: v for t, v in sts["spearman"].items() if is_finite_number(v)}
    if is_finite_number(sts.get("avg")):
        values["avg"] = sts["avg"]
    dev = ((run.results or {}).get("sts_selection") or {}).get("best")
    if not is_finite_number(dev):
        dev = (sts.get("dev") or {}).get("spearman")
    if is_finite_number(dev):
        values["dev"] = dev
    values["_tasks"] = sts.get("avg_over") or [t for t in STS_TASKS if t in values]
    return values


def _dataset_order(names: Iterable[str]) -> list[str]:
    names = set(names)
    known = [n for n in BENCHMARKS if n in names]
    return known + sorted(names - set(known))


def aggregate(runs: Sequence[Run]) -> dict:
    """Tables as data: ``clustering`` and ``sts`` rows with per-column cell statistics, ``failed``."""
    keys = variant_keys(runs)
    labels = group_labels(runs, keys)
    clustering: dict[tuple[str, str], dict[str, dict[str, list]]] = {}
    sts: dict[tuple[str, str], dict[str, list]] = {}
    failed, without = [], []
    metric_names = catalogue.label_names()
    all_seeds = sorted({r.seed for r in runs if r.seed is not None}, key=str)
    for run in runs:
        label = labels[run_group(run, keys)]
        info = {"run": str(run.path), "label": label, "method": run.method, "dataset": run.dataset, "seed": run.seed}
        if run.failure:  # its numbers, if any, are those of a run that did not finish: not in the tables
            failed.append({**info, "reason": run.failure})
            continue
        if run.results is None:
            continue
        produced = False
        for source, dataset, scores in clustering_values(run):
            row = clustering.setdefault((label, source), {})
            cell = row.setdefault(dataset, {"seeds": [], "runs": [], **{m: [] for m in metric_names}})
            cell["seeds"].append(run.seed)
            cell["runs"].append(str(run.path))
            for metric in metric_names:
                cell[metric].append(scores.get(metric))
            produced = True
        values = sts_values(run)
        if values:
            row = sts.setdefault((label, run.dataset), {"seeds": [], "runs": [], "tasks": values["_tasks"]})
            row["seeds"].append(run.seed)
            row["runs"].append(str(run.path))
            for key in (*STS_TASKS, "avg", "dev"):
                row.setdefault(key, []).append(values.get(key))
            produced = True
        if not produced and not run.failure:
            without.append({**info, "reason": f"{run_folder.RESULTS} has no clustering scores (no labels?) and no STS"})

    datasets = _dataset_order(d for row in clustering.values() for d in row)
    clustering_rows = []
    for (label, source), row in clustering.items():
        cells = {}
        for dataset, cell in row.items():
            cells[dataset] = {}
            for metric in metric_names:
                pairs = [(v, s) for v, s in zip(cell[metric], cell["seeds"]) if v is not None]
                if pairs:
                    cells[dataset][metric] = cell_stats([v for v, _ in pairs], [s for _, s in pairs])
            cells[dataset]["runs"] = cell["runs"]
        avg = {}
        for metric in metric_names:
            means = [cells[d][metric]["mean"] for d in datasets if d in cells and metric in cells[d]]
            avg[metric] = statistics.fmean(means) if means else None
        over = [d for d in datasets if d in cells]
        clustering_rows.append({"label": label, "predictions": source, "cells": cells, "avg": avg, "avg_over": over})

    sts_rows = []
    for (label, dataset), row in sts.items():
        cells = {}
        for key in (*STS_TASKS, "avg", "dev"):
            pairs = [(v, s) for v, s in zip(row.get(key, []), row["seeds"]) if v is not None]
            if pairs:
                cells[key] = cell_stats([v for v, _ in pairs], [s for _, s in pairs])
        sts_rows.append({"label": label, "trained_on": dataset, "cells": cells, "runs": row["runs"],
                         "avg_over": row["tasks"]})
    return {
        "std": "sample (ddof=1)",
        "scale": "x100",
        "note": STD_NOTE + "; final step of each run (the best step is chosen with labels and is not used)",
        "seeds": all_seeds,
        "variant_keys": keys,
        "clustering": {"datasets": datasets, "rows": clustering_rows},
        "sts": {"tasks": list(STS_TASKS), "rows": sts_rows},
        "failed": failed,
        "without_table_metrics": without,
        "runs": len(runs),
        "base": _common_parent(runs),
    }


def _common_parent(runs: Sequence[Run]) -> str | None:
    if not runs:
        return None
    common = Path(os.path.commonpath([str(r.path) for r in runs]))
    return str(common.parent if len(runs) == 1 else common)


def _relative(path: str, base: str | None) -> str:
    try:
        return str(Path(path).relative_to(base)) if base else path
    except ValueError:
        return path


# -- rendering ------------------------------------------------------------------------------------------------
def _modal_n(cells: Iterable[dict | None]) -> int | None:
    """The most common number of seeds per cell (cells with another n are marked)."""
    counts = [c["n"] for c in cells if c]
    return statistics.mode(counts) if counts else None


def fmt_cell(stats: dict | None, modal_n: int | None) -> str:
    if not stats:
        return "–"
    text = f"{stats['mean']:.2f}" + (f" ± {stats['std']:.2f}" if stats["std"] is not None else "")
    return text + (f" (n={stats['n']})" if stats["n"] != modal_n else "")


def _md_escape(text: str) -> str:
    return str(text).replace("|", "\\|")


def metric_tables(per_table: int = 2) -> list[tuple[str, tuple[str, ...]]]:
    """The catalogue's metrics with labels, two to a Markdown table (ACC / NMI, ARI / AMI): (title, names)."""
    metrics = catalogue.with_labels()
    groups = [metrics[i:i + per_table] for i in range(0, len(metrics), per_table)]
    return [(" / ".join(m.title for m in group), tuple(m.name for m in group)) for group in groups]


def clustering_markdown(table: dict, metrics: Sequence[str]) -> tuple[list[str], int | None]:
    datasets, rows = table["datasets"], table["rows"]
    modal = _modal_n(c.get(m) for r in rows for c in r["cells"].values() for m in metrics)
    head = ["method", "predictions"]
    titles = {m.name: m.title for m in catalogue.METRICS}
    for d in datasets:
        head += [f"{SHORT_NAMES.get(d, d)} {titles[m]}" for m in metrics]
    head += [f"Avg {titles[m]}" for m in metrics]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * 2 + "---:|" * (len(head) - 2)]
    for row in rows:
        cells = [_md_escape(row["label"]), row["predictions"]]
        for d in datasets:
            cells += [fmt_cell(row["cells"].get(d, {}).get(m), modal) for m in metrics]
        partial = len(row["avg_over"]) < len(datasets)
        for m in metrics:
            value = row["avg"][m]
            text = "–" if value is None else f"{value:.2f}"
            cells.append(text + (f" ({len(row['avg_over'])}/{len(datasets)} sets)" if partial and value else ""))
        lines.append("| " + " | ".join(cells) + " |")
    return lines, modal


def sts_markdown(table: dict) -> tuple[list[str], int | None]:
    rows = table["rows"]
    modal = _modal_n(c for r in rows for c in r["cells"].values())
    has_dev = any("dev" in r["cells"] for r in rows)
    head = ["method", "trained on", *STS_TASKS, "Avg."] + (["STS-B dev"] if has_dev else [])
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * 2 + "---:|" * (len(head) - 2)]
    for row in rows:
        keys = [*STS_TASKS, "avg"] + (["dev"] if has_dev else [])
        cells = [_md_escape(row["label"]), row["trained_on"]] + [fmt_cell(row["cells"].get(k), modal) for k in keys]
        lines.append("| " + " | ".join(cells) + " |")
    return lines, modal


def markdown(agg: dict, title: str = "Results") -> str:
    lines = [f"# {title}", "", f"{agg['runs']} run folder(s). Numbers x100, {agg['note']}."]
    if agg.get("base"):
        lines.append(f"Run folders under `{agg['base']}`.")
    if agg["seeds"]:
        lines.append(f"Seeds seen: {', '.join(map(str, agg['seeds']))}.")
    if agg["clustering"]["rows"]:
        for name, metrics in metric_tables():
            table, modal = clustering_markdown(agg["clustering"], metrics)
            lines += ["", f"## Clustering: {name}", "", f"n = {modal} seeds per cell unless marked (n=...).", ""]
            lines += table
        lines += ["", "Avg: mean of the row's dataset means (a row missing datasets says over how many)."]
    if agg["sts"]["rows"]:
        table, modal = sts_markdown(agg["sts"])
        lines += ["", "## STS (Spearman x100; STS12-16 as the runs aggregated them, STS-B/SICK-R test)", "",
                  f"n = {modal} seeds per cell unless marked (n=...). STS-B dev: the score used for selection "
                  "(sts_selection.best) or the final dev score (sts.dev).", ""]
        lines += table
    if not agg["clustering"]["rows"] and not agg["sts"]["rows"]:
        lines += ["", "No run has clustering scores or STS results."]
    problems = agg["failed"] + agg["without_table_metrics"]
    if problems:
        lines += ["", f"## Runs without results in the tables ({len(problems)})", "",
                  "| run | method | dataset | seed | why |", "|---|---|---|---|---|"]
        for entry in problems:
            why = _md_escape(first_line(entry["reason"]))[:300]
            run = _relative(entry["run"], agg.get("base"))
            lines.append(f"| {run} | {entry['method']} | {entry['dataset']} | {entry['seed']} | {why} |")
    return "\n".join(lines) + "\n"


def csv_rows(agg: dict) -> list[dict]:
    """One line per (row, column, metric): easy to load with pandas."""
    out = []
    for row in agg["clustering"]["rows"]:
        for dataset, cell in row["cells"].items():
            for metric in catalogue.label_names():
                if metric in cell:
                    out.append({"table": "clustering", "label": row["label"], "predictions": row["predictions"],
                                "column": dataset, "metric": metric, **_csv_stats(cell[metric])})
    for row in agg["sts"]["rows"]:
        for key, stats in row["cells"].items():
            out.append({"table": "sts", "label": row["label"], "predictions": "", "column": key,
                        "metric": "spearman", "trained_on": row["trained_on"], **_csv_stats(stats)})
    return out


def _csv_stats(stats: dict) -> dict:
    return {"mean": round(stats["mean"], 4), "std": None if stats["std"] is None else round(stats["std"], 4),
            "n": stats["n"], "seeds": " ".join(map(str, stats["seeds"]))}


def write_outputs(agg: dict, out_dir: Path, title: str = "Results") -> list[Path]:
    out_dir.mkdir(parents=True, exist_ok=True)
    md, table_csv, js = (out_dir / name for name in OUTPUT_NAMES)
    atomic_write_text(md, markdown(agg, title))
    rows = csv_rows(agg)
    columns = ["table", "label", "predictions", "trained_on", "column", "metric", "mean", "std", "n", "seeds"]
    with atomic_open(table_csv, newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=columns)
        writer.writeheader()
        writer.writerows(rows)
    atomic_write_text(js, json.dumps(agg, indent=2, default=str))
    return [md, table_csv, js]


def aggregate_folders(paths: Sequence[str | Path]) -> tuple[dict, list[Run]]:
    run_dirs = run_folder.find_runs(paths)
    if not run_dirs:
        where = ", ".join(map(str, paths))
        raise UserError(f"no run folders (with {run_folder.RESULTS}, {run_folder.CONFIG} or {run_folder.HYDRA}/) "
                        f"under {where}")
    runs = [load_run(p) for p in run_dirs]
    return aggregate(runs), runs


# -- what `python tools.py aggregate` does (ctclust.commands.aggregate) ------------------------------------------
def aggregate_command(runs: Sequence[str | Path], output: str | Path | None = None, title: str | None = None) -> None:
    """``python tools.py aggregate`` (ctclust.commands.aggregate): the tables of the runs under ``runs`` printed and,
    in ``output`` (default: the one multirun folder given), written as aggregate.md/.csv/.json."""
    agg, _ = aggregate_folders(runs)
    title = title or ("Results of " + ", ".join(str(p) for p in runs))
    text = markdown(agg, title)
    print(text)
    out = Path(output) if output else None
    if out is None and len(runs) == 1 and not run_folder.is_run(Path(runs[0])):
        out = Path(runs[0])  # a multirun folder: the tables go next to its jobs
    if out is None:
        print("(not written: pass --output DIR to write aggregate.md/.csv/.json)", file=sys.stderr)
        return
    for path in write_outputs(agg, out, title):
        print(f"wrote {path}", file=sys.stderr)

