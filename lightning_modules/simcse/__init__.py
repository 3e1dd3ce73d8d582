"""Unsupervised SimCSE (Gao et al., EMNLP 2021): the baseline ClusterNS builds on."""
from lightning_modules.simcse.module import SimCSE

__all__ = ["SimCSE"]
