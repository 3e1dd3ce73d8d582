"""Evaluation code usable without a Trainer, one sub-package per concern, each importing only those before it
(docs/architecture.md, "Inside evaluation"; ``figures.py``, the one way a figure is drawn, below them all):

- ``clustering``: metrics, label-free scores, confusion matrix, the scan over K, bag-of-words rows;
- ``model_io``: a model and a run folder's files in and out: checkpoint or Hub name -> encoder (``load``), the
  clustering files of a run (``run_files``), embeddings kept on disk, export, model card, predict, choose-k;
- ``run_report``: what one run's folder shows (describe, plots, summary, report.html);
- ``benchmarks``: an encoder on clustering, STS, SentEval transfer / few-shot and MTEB (``evaluate_model``);
- ``across_runs``: tables over seeds and sweeps, paper tables, W&B.
"""
