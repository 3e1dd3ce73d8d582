"""A Trainer run whose model only records what each epoch's batches hold: tests of what a datamodule yields."""
from __future__ import annotations

from typing import Callable


def seen_per_epoch(datamodule, items: Callable[[dict], list], epochs: int = 2):
    """Fit a one-weight model for ``epochs`` epochs on the CPU (no logger, checkpoint, progress bar or summary),
    its training step keeping ``items(batch)``: ({epoch: the items of its batches, in order}, the trainer)."""
    import lightning as L
    import torch

    class Recorder(L.LightningModule):
        def __init__(self):
            super().__init__()
            self.weight = torch.nn.Parameter(torch.zeros(()))
            self.seen: dict[int, list] = {}

        def training_step(self, batch, batch_idx):
            self.seen.setdefault(self.current_epoch, []).extend(items(batch))
            return self.weight * 0

        def configure_optimizers(self):
            return torch.optim.SGD(self.parameters(), lr=0.1)

    model = Recorder()
    trainer = L.Trainer(max_epochs=epochs, accelerator="cpu", logger=False, enable_checkpointing=False,
                        enable_progress_bar=False, enable_model_summary=False)
    trainer.fit(model, datamodule=datamodule)
    return model.seen, trainer
