"""Hydra callbacks of sweeps (multirun): the summary table and W&B groups across runs."""
