"""Hydra callbacks: the run folder check before Hydra creates it, and sweeps' (multirun) summary table and
W&B groups across runs."""
