"""ClusterNS: Clustering-aware Negative Sampling for sentence representations (Deng et al., Findings of ACL 2023)."""
from lightning_modules.clusterns.module import ClusterNS

__all__ = ["ClusterNS"]
