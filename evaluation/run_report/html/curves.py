"""The training curves of a run's metrics CSV as inline SVG, the panels of ``plots/training_curves.png``."""
from __future__ import annotations

import math
from html import escape
from pathlib import Path

import numpy as np

from evaluation.run_report.plots import curve_panels, palette, partial_batch_steps, stage_boundaries

WIDTH, HEIGHT = 460, 240
LEFT, RIGHT, BOTTOM = 56, 12, 30
MAX_POINTS = 600  # per curve: a page of a 100k-step run stays small


def nice_ticks(lo: float, hi: float, count: int = 4) -> tuple[list[float], int]:
    """Round tick values (1, 2 or 5 times a power of ten apart) within [lo, hi], and the decimals they need."""
    if not hi > lo:
        return [lo], 3
    raw = (hi - lo) / count
    power = 10.0 ** math.floor(math.log10(raw))
    step = next(m * power for m in (1, 2, 5, 10) if m * power >= raw)
    first = math.ceil(lo / step - 1e-9)
    ticks = [i * step for i in range(first, math.floor(hi / step + 1e-9) + 1)]
    return ticks, max(0, -math.floor(math.log10(step)))


def panel_svg(name: str, series: dict[str, tuple[np.ndarray, np.ndarray]], marks: list[tuple[int, str]]) -> str:
    """One panel: ``series`` maps a metric name to (steps, values), drawn as polylines on shared axes."""
    steps = np.concatenate([s for s, _ in series.values()])
    values = np.concatenate([v for _, v in series.values()])
    x0, x1 = float(steps.min()), float(steps.max())
    y0, y1 = float(values.min()), float(values.max())
    pad = (y1 - y0) * 0.05 or abs(y0) * 0.05 or 1.0
    y0, y1 = y0 - pad, y1 + pad
    x1 = x1 if x1 > x0 else x0 + 1
    legend, x, row = [], LEFT, 0  # (x, y) of each series' legend entry, in rows under the title
    for key in series:
        width = 13 + 6.8 * len(key.split("/", 1)[-1]) + 12  # 11 px text: an upper bound for common fonts
        if x + width > WIDTH - RIGHT and x > LEFT:
            x, row = LEFT, row + 1
        legend.append((x, 30 + 12 * row))
        x += width
    top = 40 + 12 * row
    plot_w, plot_h = WIDTH - LEFT - RIGHT, HEIGHT - top - BOTTOM

    def sx(v):
        return LEFT + (v - x0) / (x1 - x0) * plot_w

    def sy(v):
        return top + (1 - (v - y0) / (y1 - y0)) * plot_h

    parts = [f'<svg class="curve" xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" '
             f'viewBox="0 0 {WIDTH} {HEIGHT}" role="img" aria-label="{escape(name)}">',
             f'<text x="{LEFT}" y="14" class="panel-title">{escape(name)}</text>',
             f'<rect x="{LEFT}" y="{top}" width="{plot_w}" height="{plot_h}" class="frame"/>']
    ticks, decimals = nice_ticks(y0, y1)
    for tick in ticks:
        y = sy(tick)
        parts.append(f'<line x1="{LEFT}" x2="{LEFT + plot_w}" y1="{y:.1f}" y2="{y:.1f}" class="grid"/>'
                     f'<text x="{LEFT - 4}" y="{y + 3:.1f}" class="tick" text-anchor="end">{tick:.{decimals}f}</text>')
    for tick in nice_ticks(x0, x1, 5)[0]:
        if tick == int(tick):  # steps are whole numbers
            parts.append(f'<text x="{sx(tick):.1f}" y="{top + plot_h + 13}" class="tick" '
                         f'text-anchor="middle">{tick:.0f}</text>')
    parts.append(f'<text x="{LEFT + plot_w / 2:.1f}" y="{HEIGHT - 3}" class="tick" text-anchor="middle">step</text>')
    for step, label in marks:
        if x0 <= step <= x1:
            x = sx(step)
            parts.append(f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{top}" y2="{top + plot_h}" class="mark"/>'
                         f'<text x="{x + 3:.1f}" y="{top + 10}" class="tick">{escape(label)}</text>')
    colours = ["#" + "".join(f"{round(255 * c):02x}" for c in rgba[:3]) for rgba in palette(max(len(series), 1))]
    for (key, (s, v)), colour, (lx, ly) in zip(series.items(), colours, legend):
        coords = " ".join(f"{sx(a):.1f},{sy(b):.1f}" for a, b in zip(s, v))
        short = key.split("/", 1)[-1]
        parts.append(f'<polyline points="{coords}" fill="none" stroke="{colour}" stroke-width="1.5">'
                     f'<title>{escape(key)}</title></polyline>')
        if len(s) <= 30:  # few evaluations: show each one
            parts += [f'<circle cx="{sx(a):.1f}" cy="{sy(b):.1f}" r="2.2" fill="{colour}"/>' for a, b in zip(s, v)]
        parts.append(f'<line x1="{lx}" x2="{lx + 10}" y1="{ly - 4}" y2="{ly - 4}" stroke="{colour}" stroke-width="2"/>'
                     f'<text x="{lx + 13}" y="{ly}" class="legend">{escape(short)}</text>')
    parts.append("</svg>")
    return "".join(parts)


def curves_svg(metrics_csv: str | Path) -> list[str]:
    """One SVG per panel of ``evaluation.run_report.plots.curve_panels``; steps with a smaller last batch are left out
    of training metrics as in the PNG. Empty when the file has no step column or no known metric."""
    import pandas as pd

    frame = pd.read_csv(metrics_csv)
    if "step" not in frame.columns:
        return []
    marks = stage_boundaries(frame)
    partial = set(partial_batch_steps(frame))
    panels = []
    for name, keys in curve_panels(frame.columns):
        series = {}
        for key in keys:
            data = frame[["step", key]].dropna().sort_values("step").groupby("step", as_index=False).last()
            if key.startswith("train/"):
                data = data[~data["step"].isin(partial)]
            data = data[np.isfinite(data[key].to_numpy(dtype=float))]
            if data.empty:
                continue
            stride = max(1, -(-len(data) // MAX_POINTS))
            data = data.iloc[list(range(0, len(data), stride)) + ([len(data) - 1] if (len(data) - 1) % stride else [])]
            series[key] = (data["step"].to_numpy(dtype=float), data[key].to_numpy(dtype=float))
        if series:
            panels.append(panel_svg(name, series, marks))
    return panels
