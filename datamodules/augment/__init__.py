"""Offline text augmentation for the short-text clustering data (docs/data.md).

Augmented views are generated once, before training, into extra columns of the data file
(``python tools.py augment INPUT --output OUT --method eda|contextual``); the settings
used are recorded in ``OUT.augment.json`` (:mod:`.columns`). EDA lives in :mod:`.eda`, the masked-LM
augmenter in :mod:`.contextual` (imported lazily: it needs torch and transformers).
"""
from .eda import EDA, OPERATIONS, EDAConfig, wordnet_synonyms

__all__ = ["EDA", "EDAConfig", "OPERATIONS", "wordnet_synonyms"]
