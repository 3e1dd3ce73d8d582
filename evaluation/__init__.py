"""Evaluation code usable without a Trainer, one sub-package per concern (docs/architecture.md):

- ``clustering``: metrics, label-free scores, confusion matrix, choosing K, bag-of-words rows;
- ``benchmarks``: an encoder on clustering, STS, SentEval transfer / few-shot and MTEB (``evaluate_model``);
- ``run_report``: what one run's folder shows (describe, plots, summary, report.html);
- ``model_io``: checkpoint or Hub name -> encoder (``load``), export, model card, predict;
- ``across_runs``: a run's objective, tables over seeds and sweeps, paper tables, reproduce, W&B.

Until this layout the modules sat flat in ``evaluation/``. Their old names (``python -m evaluation.predict``,
``from evaluation.metrics import ...``) still work: :data:`MOVED` maps each to today's module, and importing
or running an old name says where the module is now.
"""
from __future__ import annotations

import importlib.abc
import importlib.util
import sys

# flat layout -> sub-package (the names users typed in scripts and job files)
MOVED = {
    "evaluation.metrics": "evaluation.clustering.metrics",
    "evaluation.label_free": "evaluation.clustering.label_free",
    "evaluation.confusion": "evaluation.clustering.confusion",
    "evaluation.choose_k": "evaluation.clustering.choose_k",
    "evaluation.bow_baseline": "evaluation.clustering.bow_baseline",
    "evaluation.clustering_benchmarks": "evaluation.benchmarks.clustering_tasks",
    "evaluation.encoder_evaluation": "evaluation.benchmarks.encoder_evaluation",
    "evaluation.evaluate_model": "evaluation.benchmarks.evaluate_model",
    "evaluation.sts": "evaluation.benchmarks.sts",
    "evaluation.mteb_eval": "evaluation.benchmarks.mteb_eval",
    "evaluation.embedding_cache": "evaluation.benchmarks.embedding_cache",
    "evaluation.transfer": "evaluation.benchmarks.transfer",
    "evaluation.transfer_readers": "evaluation.benchmarks.senteval.readers",
    "evaluation.transfer_tasks": "evaluation.benchmarks.senteval.tasks",
    "evaluation.transfer_protocols": "evaluation.benchmarks.senteval.protocols",
    "evaluation.senteval_classifier": "evaluation.benchmarks.senteval.classifier",
    "evaluation.senteval_toolkit": "evaluation.benchmarks.senteval.toolkit",
    "evaluation.few_shot": "evaluation.benchmarks.senteval.few_shot",
    "evaluation.describe": "evaluation.run_report.describe",
    "evaluation.ctfidf": "evaluation.run_report.ctfidf",
    "evaluation.plots": "evaluation.run_report.plots",
    "evaluation.report": "evaluation.run_report.summary",
    "evaluation.run_files": "evaluation.run_report.run_files",
    "evaluation.html_report": "evaluation.run_report.html",
    "evaluation.load": "evaluation.model_io.load",
    "evaluation.export": "evaluation.model_io.export",
    "evaluation.model_card": "evaluation.model_io.model_card",
    "evaluation.predict": "evaluation.model_io.predict",
    "evaluation.aggregate": "evaluation.across_runs.aggregate",
    "evaluation.paper_table": "evaluation.across_runs.paper_table",
    "evaluation.objective": "evaluation.across_runs.objective",
    "evaluation.wandb_dashboard": "evaluation.across_runs.wandb_dashboard",
    "evaluation.sweep_trials": "evaluation.across_runs.sweep_trials",
    "evaluation.reproduce": "evaluation.across_runs.reproduce",
}


class _MovedModules(importlib.abc.MetaPathFinder):
    """Finds an old module name at its new file; the module runs under the old name (``python -m`` included)."""

    def find_spec(self, fullname, path=None, target=None):
        new = MOVED.get(fullname)
        if new is None:
            return None
        spec = importlib.util.find_spec(new)
        print(f"note: {fullname} is now {new}; the old name still works, the docs use the new one.",
              file=sys.stderr)
        return importlib.util.spec_from_file_location(fullname, spec.origin,
                                                      submodule_search_locations=spec.submodule_search_locations)


if not any(isinstance(f, _MovedModules) for f in sys.meta_path):
    sys.meta_path.append(_MovedModules())
