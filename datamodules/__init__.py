"""LightningDataModules: short-text clustering corpora, streaming text, NLI pairs."""
