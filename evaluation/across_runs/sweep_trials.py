"""The trials table of a hyper-parameter sweep (trials.md, trials.csv): one row per job with the searched
parameters' values, its objective and status (a failed trial with the first line of its error; a trial whose earlier
attempt was killed with what happened to it), the best marked; written beside ``aggregate.md`` at the end of a
multirun (``launching.hydra_callbacks``)."""
from __future__ import annotations

import csv
from pathlib import Path
from typing import Sequence

from evaluation.across_runs.aggregate import Run, first_line, short_value
from textcore.atomic_files import atomic_open, atomic_write_text
from textcore.run_folder import is_finite_number


def trials(runs: Sequence[Run], params: Sequence[str], study: Sequence[dict] | None = None) -> list[dict]:
    """One row per job of a sweep: its number, the searched parameters' values, objective, status, and a note on
    what happened to it. ``study``: the Optuna study's trials (number, state, run folder, ``killed``: why earlier
    attempts ended without a result), whose state a job folder without a result does not tell (waiting to run
    again, running in another driver)."""
    by_folder = {str(Path(record["run"]).resolve()): record for record in study or () if record.get("run")}
    rows = []
    for run in runs:
        objective = (run.results or {}).get("objective") or {}
        record = by_folder.get(str(Path(run.path).resolve()), {})
        status = "failed" if run.failure else "complete"
        if run.failure and record.get("state") in ("waiting", "running"):
            status = record["state"]
        notes = [*record.get("killed", ()), (run.results or {}).get("earlier_attempt") if not run.failure else None]
        if status == "waiting":
            notes.append("runs again when the sweep is started again")
        rows.append({
            "job": run.job_num,
            **{p: run.config.get(p, "?") for p in params},
            "objective": objective.get("name"),
            "value": None if run.failure else objective.get("value"),  # a partial run's number is no trial's
            "status": status,
            "error": first_line(run.failure) if status == "failed" else "",
            "note": "; ".join(dict.fromkeys(n for n in notes if n)),
            "run": str(run.path),
        })
    return sorted(rows, key=lambda r: (r["job"] is None, r["job"]))


def write_trials(rows: Sequence[dict], params: Sequence[str], out_dir: Path, direction: str = "maximize") -> list[Path]:
    scored = [r for r in rows if is_finite_number(r["value"])]
    best = (max if direction == "maximize" else min)(scored, key=lambda r: r["value"]) if scored else None
    head = ["job", *params, "objective value", "status", "error", "note"]
    lines = [f"# Trials ({len(rows)}; objective {rows[0]['objective'] if rows else '?'}, {direction})", "",
             "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        mark = " **best**" if r is best else ""
        value = "–" if r["value"] is None else f"{r['value']:.4f}"
        cells = [str(r["job"]), *[short_value(r[p]) for p in params], value + mark, r["status"],
                 r["error"][:200].replace("|", "\\|"), r.get("note", "")[:300].replace("|", "\\|")]
        lines.append("| " + " | ".join(cells) + " |")
    md = out_dir / "trials.md"
    atomic_write_text(md, "\n".join(lines) + "\n")
    table_csv = out_dir / "trials.csv"
    with atomic_open(table_csv, newline="") as handle:
        columns = ["job", *params, "objective", "value", "status", "error", "note", "run"]
        writer = csv.DictWriter(handle, fieldnames=columns)
        writer.writeheader()
        writer.writerows(rows)
    return [md, table_csv]
