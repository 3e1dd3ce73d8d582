"""Callbacks that keep a run safe to stop and resume: checkpoints, signals, non-finite losses, RNG state."""
