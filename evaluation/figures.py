"""The one way the evaluation tools draw a figure and write it as PNG (the run report's plots, choose_k's criteria):
matplotlib's ``Figure`` without pyplot, so no display and no global figure state."""
from __future__ import annotations

from pathlib import Path

DPI = 100


def new_figure(width: float, height: float):
    from matplotlib.figure import Figure

    return Figure(figsize=(width, height), dpi=DPI, layout="constrained")


def save_figure(fig, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=DPI)
    return path
