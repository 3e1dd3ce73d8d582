"""The trials table of a hyper-parameter sweep (trials.md, trials.csv): one row per job with the searched
parameters' values, its objective and status (a failed trial with the first line of its error), the best marked;
written beside ``aggregate.md`` at the end of a multirun (``launching.hydra_callbacks``)."""
from __future__ import annotations

import csv
from pathlib import Path
from typing import Sequence

from evaluation.across_runs.aggregate import Run, first_line, short_value
from textcore.run_folder import is_finite_number


def trials(runs: Sequence[Run], params: Sequence[str]) -> list[dict]:
    """One row per job of a sweep: its number, the searched parameters' values, objective, status."""
    rows = []
    for run in runs:
        objective = (run.results or {}).get("objective") or {}
        rows.append({
            "job": run.job_num,
            **{p: run.config.get(p, "?") for p in params},
            "objective": objective.get("name"),
            "value": None if run.failure else objective.get("value"),  # a partial run's number is no trial's
            "status": "failed" if run.failure else "complete",
            "error": first_line(run.failure) if run.failure else "",
            "run": str(run.path),
        })
    return sorted(rows, key=lambda r: (r["job"] is None, r["job"]))


def write_trials(rows: Sequence[dict], params: Sequence[str], out_dir: Path, direction: str = "maximize") -> list[Path]:
    scored = [r for r in rows if is_finite_number(r["value"])]
    best = (max if direction == "maximize" else min)(scored, key=lambda r: r["value"]) if scored else None
    head = ["job", *params, "objective value", "status", "error"]
    lines = [f"# Trials ({len(rows)}; objective {rows[0]['objective'] if rows else '?'}, {direction})", "",
             "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        mark = " **best**" if r is best else ""
        value = "–" if r["value"] is None else f"{r['value']:.4f}"
        cells = [str(r["job"]), *[short_value(r[p]) for p in params], value + mark, r["status"],
                 r["error"][:200].replace("|", "\\|")]
        lines.append("| " + " | ".join(cells) + " |")
    md = out_dir / "trials.md"
    md.write_text("\n".join(lines) + "\n", encoding="utf-8")
    table_csv = out_dir / "trials.csv"
    with open(table_csv, "w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=["job", *params, "objective", "value", "status", "error", "run"])
        writer.writeheader()
        writer.writerows(rows)
    return [md, table_csv]
