"""Callbacks that keep a run safe to stop and resume: checkpoints, non-finite losses, RNG state, empty epochs, ranks."""
