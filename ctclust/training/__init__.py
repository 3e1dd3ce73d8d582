"""One training run, from a composed configuration to its results.json.

``train.py``: :func:`~ctclust.training.train.train` (in-process callers: it raises, never exits) and ``run_job``
(what ``python run.py`` runs). What a run builds is in ``builders.py`` (``auto_clusters.py`` for
``num_clusters=auto``); what happens around ``trainer.fit`` (the run folder's lock, where training starts, signals,
the ways a fit ends early) in ``lifecycle.py`` (where training starts: ``start_point.py``); results.json, whatever
the ending, in ``results.py``.
"""
import os

from textcore.checkout import ROOT

os.environ.setdefault("PROJECT_ROOT", str(ROOT))  # conf/paths/default.yaml reads it
# the tokenizers' worker threads fight the DataLoader's on 2-core machines
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
