"""Rich progress bar that reads well for step-budgeted runs.

Lightning's bar prints ``Epoch 12/-2`` when ``max_epochs=-1`` (training bounded by ``max_steps``),
which is how every config here trains. This bar shows the global step against the step budget
instead, and the epoch alone.
"""

from __future__ import annotations

from lightning.pytorch.callbacks import RichProgressBar


def train_description(current_epoch: int, max_epochs: int | None, global_step: int, max_steps: int) -> str:
    """Text in front of the training bar: the epoch, and the step budget when there is one."""
    text = f"Epoch {current_epoch}"
    if max_epochs is not None and max_epochs > 0:
        text += f"/{max_epochs - 1}"
    if max_steps is not None and max_steps > 0:
        text += f" · step {global_step}/{max_steps}"
    return text


class StepProgressBar(RichProgressBar):
    """``RichProgressBar`` whose description is ``Epoch E · step S/N`` for step-budgeted runs."""

    def _get_train_description(self, current_epoch: int) -> str:
        trainer = self.trainer
        text = train_description(current_epoch, trainer.max_epochs, trainer.global_step, trainer.max_steps)
        if len(self.validation_description) > len(text):
            text = f"{text:{len(self.validation_description)}}"
        return text

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        super().on_train_batch_end(trainer, pl_module, outputs, batch, batch_idx)
        # Lightning sets the description once per epoch; the step count must follow every step
        if self.progress is not None and self.is_enabled and self.train_progress_bar_id is not None:
            text = self._get_train_description(trainer.current_epoch)
            style = self.theme.description
            self.progress.update(self.train_progress_bar_id, description=f"[{style}]{text}" if style else text)
