"""scripts/bench/gpu.py runs end to end at tiny scale on the CPU (the GPU numbers need a GPU: docs/gpu.md)."""
from __future__ import annotations

import math

import pytest

from tests.helpers import load_script


def test_tiny_cpu_run_has_a_row_per_method_precision_and_layout(tmp_path):
    bench = load_script("bench/gpu")
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
    bench = load_script("bench/gpu")
    with pytest.raises(SystemExit, match="does not write BENCHMARKS.md's GPU section"):
        bench.main(["--device", "cpu", "--tiny"])


def test_end_to_end_rows_time_trainer_fit_beside_the_raw_step(tmp_path, short_text_dir):
    bench = load_script("bench/gpu")
    data = tmp_path / "data"
    data.mkdir()
    lines = (short_text_dir / "stackoverflow.csv").read_text(encoding="utf-8").splitlines()[:201]
    (data / "stackoverflow.csv").write_text("\n".join(lines) + "\n", encoding="utf-8")
    out = tmp_path / "bench.md"
    rows = bench.main(["--device", "cpu", "--tiny", "--methods", "sccl", "--precisions", "fp32", "--end-to-end",
                       "only", "--e2e-steps", "2,4", "--steps", "1", "--warmup", "0", "--data-dir", str(data),
                       "--out", str(out), "--e2e-variants", "seed=3 trainer.log_every_n_steps=1"])
    row, variant = rows
    for r in rows:
        assert r["layout"] == "end-to-end" and r["views"] == 2 and r["raw_steps_per_s"] > 0
        assert math.isfinite(r["overhead_ms"]) and r["start_up_s"] > 0
    assert row["settings"] == "" and variant["settings"] == "seed=3 trainer.log_every_n_steps=1"
    # the two runs trained 2 and 4 steps on the small file (not the shared one)
    text = out.read_text()
    assert "| sccl | distilbert-base, 8 | fp32 | 8192 | defaults |" in text and "loop overhead ms/step" in text
    assert "| sccl | distilbert-base, 8 | fp32 | 8192 | `seed=3 trainer.log_every_n_steps=1` |" in text
    assert "| authors |" not in text  # --end-to-end only: no raw table


def test_matmul_parameters_leave_the_embedding_tables_out():
    bench = load_script("bench/gpu")
    import torch

    model = torch.nn.Sequential(torch.nn.Embedding(100, 8), torch.nn.Linear(8, 4))
    assert bench.matmul_parameters(model) == 8 * 4 + 4
