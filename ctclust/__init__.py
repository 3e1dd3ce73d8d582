"""Contrastive, clustering-aware text representations: SCCL, PairSupCon, ClusterNS and AECL with PyTorch
Lightning and Hydra.

From Python: ``from ctclust import TextClusterer`` (``ctclust.api``). From a shell: ``python run.py`` and
``python tools.py`` in the checkout, or ``ctclust-train`` and ``ctclust-tools`` after ``pip install -e .``.
"""
from ctclust.api import TextClusterer, load_demo

__all__ = ["TextClusterer", "load_demo"]
