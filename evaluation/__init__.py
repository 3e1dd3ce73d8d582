"""Evaluation code usable without a Trainer: clustering metrics, KMeans protocols."""
