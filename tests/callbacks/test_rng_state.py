"""Random streams in checkpoints (callbacks/safety/rng_state.py): under DDP every rank gets its own back."""
from __future__ import annotations

import pytest
import torch

from callbacks.safety.rng_state import RNGState
from tests.helpers.ddp import spawn_gloo


def _worker(rank: int, world: int, out_dir: str) -> None:
    torch.manual_seed(100 + rank)  # each rank's stream differs, as its dropout masks do
    saved = RNGState().state_dict()  # every rank takes part; rank 0's copy is the one a checkpoint holds
    expected = torch.rand(3)
    torch.manual_seed(0)
    RNGState().load_state_dict(saved)  # the resumed rank, from rank 0's file
    torch.save({"expected": expected, "got": torch.rand(3), "ranks": len(saved.get("ranks", []))},
               f"{out_dir}/rank{rank}.pt")


@pytest.mark.slow
def test_each_rank_resumes_its_own_random_stream(tmp_path):
    spawn_gloo(_worker, 2, tmp_path)
    results = [torch.load(tmp_path / f"rank{r}.pt") for r in range(2)]
    assert all(r["ranks"] == 2 for r in results)
    assert not torch.equal(results[0]["expected"], results[1]["expected"])
    for r in results:
        assert torch.equal(r["got"], r["expected"])


def test_one_process_keeps_the_plain_layout():
    """Checkpoints of single-process runs (and those written before) hold one state, not a list of ranks."""
    torch.manual_seed(3)
    saved = RNGState().state_dict()
    assert "ranks" not in saved and "torch" in saved
    expected = torch.rand(2)
    RNGState().load_state_dict(saved)
    assert torch.equal(torch.rand(2), expected)
