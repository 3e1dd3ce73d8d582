"""The files of a run folder that commands find by name, and how runs are found.

``run.py`` writes one folder per run (``logs/train/runs/<method>_<dataset>/<time>``, a multirun's
``<sweep>/<n>``). Validation, the callbacks, the evaluation CLIs and the scripts all read the same few
files from it; this module is the one place their names are spelled, low in the import graph so that
every layer can use it. What the clustering files hold and how to read them: ``evaluation.run_files``.
"""
from __future__ import annotations

CONFIG = "config_resolved.yaml"       # the run's resolved config (every value after interpolation)
RESULTS = "results.json"              # final metrics, timings and the run's metadata
CHECKPOINTS = "checkpoints"           # Lightning checkpoints of the run
LAST_CHECKPOINT = f"{CHECKPOINTS}/last.ckpt"   # what a resume and the evaluation CLIs read
BEST_CHECKPOINT = f"{CHECKPOINTS}/best.ckpt"   # the weights an STS selection kept
