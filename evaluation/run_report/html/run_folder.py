"""report.html of a run folder, from the files the run wrote (or the same values handed over in memory)."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from evaluation.model_io import run_files
from evaluation.run_report.html.curves import curves_svg
from evaluation.run_report.html.data import page_data, summary_table
from evaluation.run_report.html.page import render_page
from evaluation.run_report.plots import map_rows
from textcore.errors import writing
from textcore.run_folder import RunFolder


def write_run_page(run_dir: str | Path, report: dict | None = None, embeddings: np.ndarray | None = None,
                   results: dict | None = None, projection: str = "tsne", max_points: int = 3000,
                   seed: int = 0, predictions: run_files.RunPredictions | None = None) -> Path:
    """Write ``<run>/report.html`` and return its path.

    ``report``: the cluster descriptions (``evaluation.run_report.describe``; default: the run's clusters.json);
    ``embeddings``: the final evaluation embeddings (default: ``embeddings/after.npy``, else the run's
    encoder); ``results``: the run's results (default: its results.json). A run without predictions.csv
    (STS) gets the summary and the curves only.
    """
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        raise run_files.RunFolderError(f"Run folder '{run_dir}' does not exist.")
    if results is None:
        results = RunFolder(run_dir).results()
    title = run_files.run_title(run_dir)
    if (run_dir / run_files.PREDICTIONS).is_file():
        if predictions is None:  # the end of a run passes what it wrote: predictions.csv is not read back
            predictions = run_files.load_predictions(run_dir)
        report = report if report is not None else _saved_report(run_dir, len(predictions.texts))
        if embeddings is None:
            embeddings = run_files.run_embeddings(run_dir, predictions.texts)
        partition = report["primary"]
        # the texts of the embedding map in plots/ (and its t-SNE, computed once)
        rows = map_rows(len(predictions.texts), max_points, seed,
                        run_files.load_array(run_dir, run_files.EMBEDDINGS_BEFORE_ROWS))
        data = page_data(predictions.texts, predictions.partitions[partition], embeddings, report,
                         labels=predictions.labels, partition=partition, projection=projection,
                         max_points=max_points, seed=seed, results=results, title=title, map_rows=rows)
    else:
        data = {"title": title, "points": None, "clusters": [], "summary": summary_table(results)}
    metrics = run_dir / run_files.METRICS_CSV
    curves = curves_svg(metrics) if metrics.is_file() else []
    path = run_dir / run_files.REPORT_HTML
    with writing(path):
        path.write_text(render_page(data, curves), encoding="utf-8")
    return path


def _saved_report(run_dir: Path, num_texts: int) -> dict:
    path = run_dir / run_files.CLUSTERS_JSON
    if not path.is_file():
        raise run_files.RunFolderError(
            f"'{run_dir}' has no {run_files.CLUSTERS_JSON}: run "
            f"python tools.py describe --run {run_dir} --html")
    report = json.loads(path.read_text(encoding="utf-8"))
    if report.get("num_texts") != num_texts:
        raise run_files.RunFolderError(
            f"'{path}' describes {report.get('num_texts')} texts but predictions.csv has {num_texts}: "
            f"run python tools.py describe --run {run_dir} --html")
    return report
