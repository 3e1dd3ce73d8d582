"""Contrastive, clustering-aware text representations: SCCL, PairSupCon, ClusterNS and AECL with PyTorch
Lightning and Hydra. Training is ``python run.py``, the tools ``python tools.py``."""
