"""Evaluation code usable without a Trainer, one sub-package per concern (docs/architecture.md):

- ``clustering``: metrics, label-free scores, confusion matrix, choosing K, bag-of-words rows;
- ``benchmarks``: an encoder on clustering, STS, SentEval transfer / few-shot and MTEB (``evaluate_model``);
- ``run_report``: what one run's folder shows (describe, plots, summary, report.html);
- ``model_io``: checkpoint or Hub name -> encoder (``load``), export, model card, predict;
- ``across_runs``: a run's objective, tables over seeds and sweeps, paper tables, reproduce, W&B.
"""
