"""A paper's published table beside this project's runs (docs/evaluation.md, "The paper's table beside yours").

    python tools.py paper-table sccl_table1 --runs logs/train/multiruns/<sweep>
    python tools.py paper-table --list

The published numbers are data: ``evaluation/across_runs/paper_tables/<table>.yaml`` (the paper, the table, one entry
per row with its values per dataset, which runs it is compared with, and the command that makes such a
run). Under ``--runs`` every ``results.json`` of ``run.py`` (matched by ``method`` and ``dataset``, and by
``backbone`` when the row names one, as the STS tables' rows do; the
row's ``metrics`` are dotted paths in it, fractions; runs on a sample and runs that did not finish are
left out) and every JSON of ``evaluation.benchmarks.evaluate_model``
(matched by its ``model``, e.g. ``tfidf``; its clustering ACC/NMI per dataset) is read. For each row and
dataset with runs it prints: paper | this project (mean ± std over the runs found, n) | difference; then
the rows without a run and the exact command that would make each.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Sequence

import numpy as np

from textcore import run_folder
from textcore.errors import ConfigError, MissingFileError

TABLES = Path(__file__).resolve().parent / "paper_tables"
# where a row's numbers come from: a run's results.json (metrics by dotted path, the run's own dataset),
# a run's end-of-training evaluation.json (clustering benchmarks evaluated after training on other data, as
# PairSupCon does), or evaluation.benchmarks.evaluate_model's JSON (an untrained model or a bag-of-words baseline)
SOURCES = ("run", "run_evaluation", "evaluate_model")


def available() -> list[str]:
    return sorted(p.stem for p in TABLES.glob("*.yaml"))


def load_table(name: str) -> dict:
    import yaml

    path = Path(name) if name.endswith(".yaml") else TABLES / f"{name}.yaml"
    if not path.is_file():
        raise ConfigError(f"no paper table '{name}'; available: {', '.join(available())}")
    table = yaml.safe_load(path.read_text(encoding="utf-8"))
    for row in table.get("rows", []):
        if row.get("source") not in SOURCES:
            raise ConfigError(f"{path}: row {row.get('name')!r} needs source: one of {', '.join(SOURCES)}")
        for dataset, values in row["values"].items():
            if len(values) != len(table["columns"]):
                raise ConfigError(f"{path}: row {row['name']}, {dataset}: {len(values)} values for columns "
                                  f"{table['columns']}")
    return table


def _lookup(results: dict, path: str):
    node = results
    for part in path.split("."):
        if not isinstance(node, dict) or part not in node:
            return None
        node = node[part]
    return node if isinstance(node, (int, float)) and not isinstance(node, bool) else None


def _json(path: Path):
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def find_results(folder: Path) -> tuple[list[dict], list[dict]]:
    """(run.py results, evaluate_model results) under ``folder``: the runs as ``textcore.run_folder.find_runs`` finds
    them, and any other JSON file that holds an ``evaluate_model`` result."""
    runs = []
    for run in run_folder.find_runs([folder]) if folder.is_dir() else []:  # no folder yet: nothing found
        try:
            data = run_folder.RunFolder(run).results()
        except run_folder.RunFileError:
            data = None
        if not isinstance(data, dict) or "method" not in data or "dataset" not in data:
            continue
        if data.get("sample") or data.get("status", "finished") != "finished":
            continue  # a sample (run.py's dataset.sample) or a run that did not finish is no reproduction
        try:
            final = run_folder.RunFolder(run).json(run_folder.EVALUATION)
        except run_folder.RunFileError:
            final = None
        runs.append({"path": run / run_folder.RESULTS, **data, "final_evaluation_file": final})
    evaluations = []
    for path in sorted(folder.rglob("*.json")):
        if path.name == run_folder.RESULTS:
            continue
        data = _json(path)
        if isinstance(data, dict) and "model" in data and isinstance(data.get("clustering"), dict) \
                and "datasets" in data["clustering"]:
            evaluations.append({"path": path, **data})
    return runs, evaluations


def _same_model(run: dict, row: dict) -> bool:
    """The run is of the row's method, and of its backbone where the row names one."""
    return run["method"] == row["method"] and (not row.get("backbone") or run.get("backbone") == row["backbone"])


def _clustering_of(result: dict | None, dataset: str) -> dict | None:
    """``result["clustering"]["datasets"][dataset]`` of an evaluation JSON, or None."""
    return (((result or {}).get("clustering") or {}).get("datasets") or {}).get(dataset)


def values_for(row: dict, dataset: str, runs: list[dict], evaluations: list[dict],
               columns: Sequence[str]) -> tuple[list[list], set[str]]:
    """One list of per-run values (x100) per column, and what the matched runs were (backbone, steps)."""
    keys = [c.lower() for c in columns]
    matches: list[tuple[str, list]] = []  # (what the run was, its value per column or None)
    for run in runs if row["source"] != "evaluate_model" else ():
        if not _same_model(run, row):
            continue
        what = f"{run.get('backbone', '?')}, {run.get('steps', '?')} steps"
        if row["source"] == "run" and run["dataset"] == dataset:
            matches.append((what, [_lookup(run, metric) for metric in row["metrics"]]))
        elif row["source"] == "run_evaluation" and (scores := _clustering_of(run.get("final_evaluation_file"),
                                                                              dataset)) is not None:
            matches.append((what, [scores.get(key) for key in keys]))
    for ev in evaluations if row["source"] == "evaluate_model" else ():
        if ev.get("model") == row["model"] and (scores := _clustering_of(ev, dataset)) is not None:
            matches.append((f"{ev['model']}, {len(ev['clustering'].get('seeds', []))} KMeans seeds",
                            [scores.get(key) for key in keys]))
    out: list[list] = [[] for _ in columns]
    for _, values in matches:
        for i, value in enumerate(values):
            if value is not None:
                out[i].append(100 * value)
    return out, {what for what, _ in matches}


def compare(table: dict, runs: list[dict], evaluations: list[dict]) -> dict:
    """``{"rows": [...], "missing": [...]}``: matched cells and the rows without runs (with commands)."""
    matched, missing = [], []
    for row in table["rows"]:
        for dataset, paper in row["values"].items():
            found, what = values_for(row, dataset, runs, evaluations, table["columns"])
            if not any(found):
                missing.append({"row": row["name"], "dataset": dataset,
                                "command": row["command"].format(dataset=dataset)})
                continue
            for column, published, ours in zip(table["columns"], paper, found):
                if not ours:
                    continue
                mean = float(np.mean(ours))
                matched.append({"row": row["name"], "dataset": dataset, "metric": column, "paper": published,
                                "mean": mean, "std": float(np.std(ours)), "n": len(ours),
                                "difference": mean - published, "runs": "; ".join(sorted(what))})
    return {"rows": matched, "missing": missing}


def markdown(table: dict, result: dict) -> str:
    lines = [f"# {table['paper']}, {table['table']}: the paper beside this project's runs", ""]
    if result["rows"]:
        lines += ["| row | dataset | metric | paper | this project (mean ± std, runs) | difference | runs found |",
                  "|---|---|---|---:|---:|---:|---|"]
        lines += [f"| {r['row']} | {r['dataset']} | {r['metric']} | {r['paper']:.2f} | "
                  f"{r['mean']:.2f} ± {r['std']:.2f} ({r['n']}) | {r['difference']:+.2f} | {r['runs']} |"
                  for r in result["rows"]]
        lines += ["", "A run counts for a row when its method and dataset match (and its backbone, where the row "
                  "names one); compare like with like (the row's command is the paper's recipe; the runs found are "
                  "listed per row)."]
    else:
        lines += ["No run under --runs matches a row of this table."]
    if result["missing"]:
        lines += ["", f"Rows without a run ({len(result['missing'])}); the command that makes one:", ""]
        lines += [f"- {m['row']}, {m['dataset']}: `{m['command']}`" for m in result["missing"]]
    return "\n".join(lines) + "\n"


def compare_with_paper(*, table: str | None, runs: Path | None, output: Path | None, list: bool) -> str:
    """``python tools.py paper-table`` (its options, ctclust.commands.paper_table): the paper tables' names
    (``list``, or no ``table``), else ``table`` beside the results under ``runs``, printed and written to ``output``."""
    if list or not table:
        text = "\n".join(available())
        print(text)
        return text
    table = load_table(table)
    if runs is None or not runs.is_dir():
        raise MissingFileError(f"--runs '{runs}' is not a folder (give the folder holding the runs' results).")
    runs, evaluations = find_results(runs)
    text = markdown(table, compare(table, runs, evaluations))
    if output:
        output.parent.mkdir(parents=True, exist_ok=True)
        output.write_text(text, encoding="utf-8")
    print(text)
    return text

