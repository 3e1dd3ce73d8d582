"""scripts/bench/backends.py --profile: ONNX Runtime's profile read into kernel time per operator, the matrix
products' share of a pass, and the ratio to torch a pass would reach with free non-matrix work."""
from __future__ import annotations

import pytest
import torch

from evaluation.model_io.load import load_encoder
from tests.helpers import load_script
from textcore.encoding.onnx_runtime import embedder

pytest.importorskip("onnxruntime")
backends = load_script("bench/backends")


def node(op: str, micros: int, name: str = "n") -> dict:
    return {"cat": "Node", "name": f"{name}_kernel_time", "dur": micros, "args": {"op_name": op}}


def test_kernel_seconds_sums_the_kernel_events_of_each_operator_and_ignores_the_rest():
    events = [node("MatMul", 1_500_000, "a"), node("MatMul", 500_000, "b"), node("BiasGelu", 250_000),
              {"cat": "Node", "name": "a_fence_before", "dur": 9_000_000, "args": {"op_name": "MatMul"}},
              {"cat": "Session", "name": "model_run", "dur": 7_000_000}]
    assert backends.kernel_seconds(events) == {"MatMul": 2.0, "BiasGelu": 0.25}


def test_the_ceiling_divides_the_ratio_by_the_matrix_share_and_refuses_an_impossible_share():
    assert backends.ceiling(1.2, 0.8) == pytest.approx(1.5)
    assert backends.ceiling(0.9, 1.0) == pytest.approx(0.9)
    for share in (0.0, 1.2, -0.1):
        with pytest.raises(ValueError, match="share"):
            backends.ceiling(1.0, share)


def test_a_profiled_pass_of_the_tiny_export_gives_shares_of_its_operators(tmp_path):
    torch.manual_seed(0)
    encoder, pooling = load_encoder("tiny")
    texts = [f"text number {i} about {'cats' if i % 2 else 'the stock market and its fall'}" for i in range(64)]
    for backend, product in (("onnx", "MatMul"), ("onnx-int8", "DynamicQuantizeMatMul")):
        shares, product_share = backends.profiled_pass(embedder(encoder, pooling, backend, tmp_path), texts, 16,
                                                       tmp_path)
        assert sum(shares.values()) == pytest.approx(1.0, abs=1e-3)
        assert product in shares and list(shares.values()) == sorted(shares.values(), reverse=True)
        assert 0 < product_share < 1  # the pass also tokenises, and the layer norms take time
