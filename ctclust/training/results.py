"""results.json: one function assembles it for every way a run ends, and writes it through the atomic writer.

``status`` says how the run ended: ``finished``, ``interrupted`` (a signal), ``failed``, ``nonfinite_loss``,
``rank_died``, ``out_of_memory``, ``evaluation_failed`` (training finished, its final evaluation did not). Every
results.json has the run's identity (method, dataset, backbone, seed), how far it got (steps, epochs, the
checkpoint), what the lifecycle knows (where it resumed from, the phases' seconds, the job's overrides in a
multirun, ...) and the sections of the evaluation callbacks; a finished one adds the headline numbers and the
``objective`` a sweeper reads. Only rank 0 writes the file.
"""
from __future__ import annotations

import json
import logging
from pathlib import Path

from omegaconf import DictConfig

from runtime import objective
from textcore import atomic_files, run_folder
from textcore.errors import UserError, writing

log = logging.getLogger(__name__)

FINISHED = "finished"
HEADLINE = ("final", "best", "best_step", "best_selected_with_labels")  # clustering's, repeated at the top level


def write_results(cfg: DictConfig, output_dir: Path, trainer, ending: dict, known: dict) -> dict:
    """results.json for a run that ended as ``ending`` says (``status`` and what that ending knows: the signal, the
    error, the checkpoint to resume from, ...); ``known`` is what the lifecycle knows whatever the ending. Returns
    the results (every rank); rank 0 writes them. A finished run's unwritable file is the run's error; a run that
    already failed only warns, so that its own error is the one reported."""
    finished = ending.get("status") == FINISHED
    results = {"method": cfg.method.name, "dataset": cfg.dataset.name, "backbone": cfg.backbone.name,
               "seed": cfg.seed, "status": ending.get("status"), "steps": trainer.global_step,
               "epochs": trainer.current_epoch, "output_dir": str(output_dir),
               "checkpoint": str(output_dir / run_folder.LAST_CHECKPOINT), **known, **ending}
    results.update(callback_sections(trainer.callbacks, strict=finished))
    if finished:
        clustering = results.get("clustering")
        if clustering:
            results.update({key: clustering[key] for key in HEADLINE})
        module = trainer.lightning_module
        default = getattr(type(module), "default_objective", None)  # a module of the user's own may declare none
        results["objective"] = objective.objective_entry(cfg.get("objective"), default, results,
                                                        trainer.is_global_zero)
    if trainer.is_global_zero:
        path = output_dir / run_folder.RESULTS
        try:
            with writing(path, atomic=True):
                atomic_files.atomic_write_text(path, json.dumps(results, indent=2, default=json_value))
        except UserError as err:
            if finished:
                raise
            log.warning("could not write the partial %s: %s", run_folder.RESULTS, err)
    return results


def callback_sections(callbacks, strict: bool = True) -> dict:
    """Each callback's ``summary()`` under its ``results_key`` (its class name without one). ``strict=False`` (a run
    that stopped early) leaves out a summary that fails: it must not hide why the run stopped."""
    sections = {}
    for callback in callbacks:
        if not hasattr(callback, "summary"):
            continue
        try:
            sections[getattr(callback, "results_key", type(callback).__name__)] = callback.summary()
        except Exception:  # noqa: BLE001 - re-raised for a finished run
            if strict:
                raise
    return sections


def json_value(value):
    """What JSON cannot hold as it is: numpy and torch scalars as their number, anything else as its text."""
    try:
        return value.item()
    except (AttributeError, ValueError, RuntimeError):
        return str(value)


def print_results(results: dict) -> None:
    """The summary table of a finished run and where its results.json is."""
    from rich.console import Console
    from rich.table import Table

    from evaluation.run_report.summary import summary_rows

    console = Console()
    rows = summary_rows(results)
    if rows:
        title = f"{results['method']} on {results['dataset']} ({results['backbone']}, {results['steps']} steps)"
        table = Table(title=title)
        for column in rows[0]:
            table.add_column(column, justify="left" if column == "what" else "right")
        for row in rows:
            table.add_row(*[str(v) for v in row.values()])
        console.print(table)
    console.print(f"results: {Path(results['output_dir']) / run_folder.RESULTS}")
