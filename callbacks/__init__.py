"""Lightning and Hydra callbacks shared by the methods, grouped by concern: evaluation, safety (checkpoints,
signals, resume), display (progress) and sweeps (Hydra multirun). A method's own callbacks (SCCL's centroid
initialisation, AECL's stages) live in its folder, lightning_modules/<method>/callbacks/."""
