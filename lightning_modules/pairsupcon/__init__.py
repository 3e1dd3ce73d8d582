"""PairSupCon: Pairwise Supervised Contrastive Learning of sentence representations (Zhang et al., EMNLP 2021)."""
from lightning_modules.pairsupcon.module import PairSupCon

__all__ = ["PairSupCon"]
