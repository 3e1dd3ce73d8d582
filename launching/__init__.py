"""Starting runs and sweeps: a paper table's runs (reproduce), runs packed onto GPUs (packing, gpu_slots), what a
sweep optimises (objective) and the Hydra callbacks around a multirun (hydra_callbacks)."""
