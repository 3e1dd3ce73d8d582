"""Saves the random number generators in checkpoints, so a resumed run draws the same dropout
masks and samples as a run that never stopped."""
from __future__ import annotations

import random

import numpy as np
import torch
from lightning.pytorch.callbacks import Callback


class RNGState(Callback):
    """Captures Python, NumPy and torch (CPU and CUDA) generator states at each checkpoint."""

    def state_dict(self) -> dict:
        name, keys, pos, has_gauss, cached = np.random.get_state()
        # plain types and tensors only: checkpoints are loaded with torch.load(weights_only=True)
        numpy_state = {"name": name, "keys": torch.from_numpy(keys.astype(np.int64)), "pos": int(pos),
                       "has_gauss": int(has_gauss), "cached": float(cached)}
        state = {"python": random.getstate(), "numpy": numpy_state, "torch": torch.get_rng_state()}
        if torch.cuda.is_available():
            state["cuda"] = torch.cuda.get_rng_state_all()
        return state

    def load_state_dict(self, state_dict: dict) -> None:
        random.setstate(state_dict["python"])
        n = state_dict["numpy"]
        np.random.set_state((n["name"], n["keys"].numpy().astype(np.uint32), n["pos"], n["has_gauss"], n["cached"]))
        torch.set_rng_state(state_dict["torch"])
        if "cuda" in state_dict and torch.cuda.is_available():
            torch.cuda.set_rng_state_all(state_dict["cuda"])
