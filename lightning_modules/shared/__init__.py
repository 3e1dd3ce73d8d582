"""What every method builds on and needs Lightning for: the base LightningModule, heads, DDP gathering,
in-batch clustering, precision settings, the shared evaluation pass and schedule. The text encoder and KMeans
are below, in ``textcore``. Nothing here imports a method."""
