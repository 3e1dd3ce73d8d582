"""Where the checkout is: the folder that holds ``conf/`` (Hydra's configuration), ``data/`` and ``logs/``.

The package is installed in place (``pip install -e .``), so the checkout is always the folder above it.
"""
from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CONF = ROOT / "conf"
