"""Saves the random number generators in checkpoints, so a resumed run draws the same dropout
masks and samples as a run that never stopped."""
from __future__ import annotations

import random

import numpy as np
import torch
from lightning.pytorch.callbacks import Callback


def _world() -> tuple[int, int]:
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    return 0, 1


class RNGState(Callback):
    """Captures Python, NumPy and torch (CPU and CUDA) generator states at each checkpoint.

    Under DDP each rank has its own streams (its dropout masks differ from the other ranks'); the checkpoint, which
    rank 0 writes, holds every rank's (``ranks``: one collective, as every rank saves), and each rank resumes its
    own: with rank 0's alone, the other ranks' first steps after a resume drew other masks than a run that never
    stopped."""

    def state_dict(self) -> dict:
        rank, world = _world()
        if world == 1:
            return self._local_state()
        import torch.distributed as dist

        states: list = [None] * world
        dist.all_gather_object(states, self._local_state())
        return {"ranks": states}

    def load_state_dict(self, state_dict: dict) -> None:
        if "ranks" in state_dict:  # a DDP run's: this rank's, or rank 0's when resumed with more processes
            rank, _ = _world()
            states = state_dict["ranks"]
            state_dict = states[rank] if rank < len(states) else states[0]
        self._load_local(state_dict)

    @staticmethod
    def _local_state() -> dict:
        name, keys, pos, has_gauss, cached = np.random.get_state()
        # plain types and tensors only: checkpoints are loaded with torch.load(weights_only=True)
        numpy_state = {"name": name, "keys": torch.from_numpy(keys.astype(np.int64)), "pos": int(pos),
                       "has_gauss": int(has_gauss), "cached": float(cached)}
        state = {"python": random.getstate(), "numpy": numpy_state, "torch": torch.get_rng_state()}
        if torch.cuda.is_available():
            state["cuda"] = torch.cuda.get_rng_state_all()
        return state

    @staticmethod
    def _load_local(state_dict: dict) -> None:
        random.setstate(state_dict["python"])
        n = state_dict["numpy"]
        np.random.set_state((n["name"], n["keys"].numpy().astype(np.uint32), n["pos"], n["has_gauss"], n["cached"]))
        torch.set_rng_state(state_dict["torch"])
        if "cuda" in state_dict and torch.cuda.is_available():
            torch.cuda.set_rng_state_all(state_dict["cuda"])
