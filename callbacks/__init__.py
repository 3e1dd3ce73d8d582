"""Lightning callbacks shared by the methods, grouped by concern: evaluation, safety (checkpoints, non-finite
losses, RNG state, ranks) and display (progress). A method's own callbacks (SCCL's centroid initialisation, AECL's
stages) live in its folder, lightning_modules/<method>/callbacks/; the run protocol they take part in (signals,
the folder's lock, requeue) is runtime/."""
