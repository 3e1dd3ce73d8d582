"""Pieces every method builds on: the text encoder, heads, DDP gathering, in-batch clustering,
the KMeans used in training, precision settings and the base LightningModule. Nothing here
imports a method."""
