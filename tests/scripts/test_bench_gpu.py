"""scripts/bench/gpu.py and its benchmarks (scripts/bench/gpu_steps/) run end to end at tiny scale on the CPU (the GPU
numbers need a GPU: docs/gpu.md)."""
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
    import torch

    from scripts.bench.gpu_steps.shared import matmul_parameters

    model = torch.nn.Sequential(torch.nn.Embedding(100, 8), torch.nn.Linear(8, 4))
    assert matmul_parameters(model) == 8 * 4 + 4


def test_bucketed_batches_embed_and_lose_as_the_plain_ones(tmp_path):
    """Padding every batch to a multiple of 8 tokens (the compiled rows' --bucket) changes the shapes, not the
    embeddings or the loss: padding is masked (one padded call, dropout off)."""
    import torch

    from scripts.bench.gpu_steps.compiled_step import distinct_batches
    from scripts.bench.gpu_steps.shared import backbone_folder, build

    folder = backbone_folder("distilbert-base", True, tmp_path)
    torch.manual_seed(0)
    module, _, _ = build("sccl", folder, 8, "short", torch.device("cpu"), "ours", 0, 0, views=2)
    module.eval()
    plain = distinct_batches(module, "short", 8, 2, 0, torch.device("cpu"))
    bucketed = distinct_batches(module, "short", 8, 2, 8, torch.device("cpu"))
    widths = [(p["view1"]["input_ids"].shape[1], b["view1"]["input_ids"].shape[1]) for p, b in zip(plain, bucketed)]
    assert all(w % 8 == 0 for _, w in widths) and any(p != b for p, b in widths)  # the shapes did change
    with torch.no_grad():
        for p, b in zip(plain, bucketed):
            for view in ("view1", "view2"):
                torch.testing.assert_close(module.encoder(**b[view]), module.encoder(**p[view]), rtol=1e-5, atol=1e-5)
            torch.testing.assert_close(module.training_step(b, 0), module.training_step(p, 0), rtol=1e-5, atol=1e-6)


def test_compiled_rows_report_compile_time_apart_from_the_steady_step(tmp_path, capsys):
    bench = load_script("bench/gpu")
    out = tmp_path / "bench.md"
    rows = bench.main(["--device", "cpu", "--tiny", "--methods", "sccl", "--precisions", "fp32", "--compile",
                       "default,reduce-overhead", "--compile-backend", "eager", "--bucket", "0,8",
                       "--distinct-batches", "2", "--steps", "1", "--warmup", "0", "--compile-only", "--out", str(out)])
    assert [(r["mode"], r["bucket"]) for r in rows] == [("eager", 0), ("default", 0), ("eager", 8), ("default", 8)]
    assert all(r["layout"] == "compiled" and r["steps_per_s"] > 0 for r in rows)
    assert rows[0]["compile_s"] is None and rows[1]["compile_s"] is not None and rows[1]["compile_s"] >= 0
    assert all(w % 8 == 0 for w in rows[2]["widths"])
    assert "reduce-overhead (CUDA graphs) skipped: no CUDA device" in capsys.readouterr().err
    text = out.read_text()
    assert "Compiled step in steady state" in text and "| sccl | distilbert-base, 8 | fp32 | 8 |" in text
    assert "| ours |" not in text  # --compile-only: no raw table


def test_cached_rows_are_compared_with_the_plain_step():
    bench = load_script("bench/gpu")
    import argparse

    base = {"method": "sccl", "arch": "distilbert-base", "batch": 400, "precision": "bf16", "tokens_per_s": 1.0,
            "peak_gib": 1.0, "mfu": None, "loss": 0.0}
    rows = [{**base, "layout": "authors", "chunk_tokens": 0, "grad_cache_tokens": 0, "steps_per_s": 10.0},
            {**base, "layout": "ours", "chunk_tokens": 8192, "grad_cache_tokens": 0, "steps_per_s": 20.0},
            {**base, "layout": "ours", "chunk_tokens": 8192, "grad_cache_tokens": 2048, "steps_per_s": 5.0}]
    text = bench.render(rows, argparse.Namespace(device="cpu"))
    assert "| sccl | distilbert-base, 400 | bf16 | ours | 8192 | 2048 | 5.00 | 1 | 1.0 | - | 0.50x | 0.25x |" in text
    assert "| sccl | distilbert-base, 400 | bf16 | ours | 8192 | - | 20.00 | 1 | 1.0 | - | 2.00x | - |" in text
