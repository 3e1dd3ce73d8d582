"""Hydra callbacks: the run folder check before Hydra creates it, and sweeps' (multirun) summary table and
W&B groups across runs. The resumable Optuna sweeper is Hydra plugin code, in hydra_plugins/resumable_optuna."""
