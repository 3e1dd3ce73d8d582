"""SCCL: Supporting Clustering with Contrastive Learning (Zhang et al., NAACL 2021)."""
from lightning_modules.sccl.module import SCCL

__all__ = ["SCCL"]
