"""scripts/bench_gpu.py runs end to end at tiny scale on the CPU (the GPU numbers need a GPU: docs/gpu.md)."""
from __future__ import annotations

import math

import pytest

from tests.helpers import load_script


def test_tiny_cpu_run_has_a_row_per_method_precision_and_layout(tmp_path):
    bench = load_script("bench_gpu")
    out = tmp_path / "bench.md"
    rows = bench.main(["--device", "cpu", "--tiny", "--methods", "sccl,pairsupcon", "--precisions", "fp32,bf16",
                       "--chunk-tokens", "24", "--grad-cache", "0,24", "--steps", "1", "--warmup", "0",
                       "--out", str(out)])
    seen = {(r["method"], r["precision"], r["layout"], r["grad_cache_tokens"]) for r in rows}
    assert seen == {(m, p, layout, g) for m in ("sccl", "pairsupcon") for p in ("fp32", "bf16")
                    for layout, g in (("authors", 0), ("ours", 0), ("ours", 24))}
    assert all(math.isfinite(r["loss"]) and r["steps_per_s"] > 0 for r in rows)
    text = out.read_text()
    assert text.count("| sccl |") == 6 and "<!-- bench-gpu:start -->" in text and "(CPU)" in text


def test_a_cpu_run_does_not_write_the_gpu_section_of_benchmarks():
    bench = load_script("bench_gpu")
    with pytest.raises(SystemExit, match="does not write BENCHMARKS.md's GPU section"):
        bench.main(["--device", "cpu", "--tiny"])
