"""AECL: Attention-Enhanced Contrastive Learning for short text clustering (2025)."""
from lightning_modules.aecl.module import AECL

__all__ = ["AECL"]
