"""The GPU figures that estimates of a run read: steps per second and peak memory per method, backbone, batch,
precision and encoder settings, as ``scripts/bench/gpu.py`` measured and recorded them (BENCHMARKS.json, part
``gpu``; BENCHMARKS.md's GPU section is their table for people). ``reproduce`` turns them into GPU hours,
``packing`` into the memory of a run."""
from __future__ import annotations

import json
from pathlib import Path

from textcore.checkout import ROOT

BENCHMARKS = ROOT / "BENCHMARKS.json"
PART = "gpu"
# each row: method, arch (distilbert-base, bert-base, bert-large), batch, precision (fp32, bf16, fp16), chunk and
# cached (the encoder's chunk and cached-gradient tokens, "-" for none), end_to_end (Trainer.fit, else the raw
# step of the project's layout), steps_per_s, peak_gib (None: not measured)
FIELDS = ("method", "arch", "batch", "precision", "chunk", "cached", "end_to_end", "steps_per_s", "peak_gib")


def gpu_figures(path: Path = BENCHMARKS) -> list[dict]:
    """The recorded rows (none when the file or its part is missing: every estimate then says it has no figure)."""
    if not Path(path).is_file():
        return []
    part = json.loads(Path(path).read_text(encoding="utf-8")).get(PART) or {}
    return list((part.get("result") or {}).get("rows") or [])
