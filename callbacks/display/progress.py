"""Rich progress bar, plain progress lines and model summary that read well in a run's console.

Lightning's bar prints ``Epoch 12/-2`` when ``max_epochs=-1`` (training bounded by ``max_steps``),
as the paper recipes train. This bar shows the global step against the run's step budget instead (the first of
``max_steps`` and ``max_epochs`` to end it), and the epoch. Both the bar and the summary draw on stderr, so stdout
carries only the result table. The summary leaves out Lightning's FLOPs column, which reads 0 for every layer unless
the module defines ``example_input_array`` (none here does).
"""

from __future__ import annotations

import logging
import statistics
import sys
import time
from collections import deque
from typing import Any

from lightning.pytorch.callbacks import Callback, RichModelSummary, RichProgressBar
from lightning.pytorch.utilities.model_summary import get_formatted_model_size, get_human_readable_count

from lightning_modules.shared.step_budget import trainer_step_budget
from textcore.console import format_duration

log = logging.getLogger(__name__)


def stderr_is_terminal() -> bool:
    """Whether progress goes to a person's terminal (else to a file: a scheduler's log, nohup, CI)."""
    return sys.stderr.isatty()


def train_description(current_epoch: int, max_epochs: int | None, global_step: int, budget: int | None) -> str:
    """Text in front of the training bar: the epoch, and the step budget when there is one (``budget``: the steps
    the run takes, ``lightning_modules.shared.step_budget``)."""
    text = f"Epoch {current_epoch}"
    if max_epochs is not None and max_epochs > 0:
        text += f"/{max_epochs - 1}"
    if budget is not None and budget > 0:
        text += f" · step {global_step}/{budget}"
    return text


class StepProgressBar(RichProgressBar):
    """``RichProgressBar`` whose description is ``Epoch E · step S/N`` for step-budgeted runs, on stderr; off
    when stderr is not a terminal (``PlainProgressLines`` writes progress there)."""

    def __init__(self, *args, console_kwargs: dict | None = None, **kwargs):
        super().__init__(*args, console_kwargs={"stderr": True, **(console_kwargs or {})}, **kwargs)

    def setup(self, trainer, pl_module, stage: str) -> None:
        super().setup(trainer, pl_module, stage)
        if not stderr_is_terminal():  # a log file would only get the bar's last frame: PlainProgressLines serves it
            self.disable()

    def _get_train_description(self, current_epoch: int) -> str:
        trainer = self.trainer
        text = train_description(current_epoch, trainer.max_epochs, trainer.global_step, trainer_step_budget(trainer))
        if len(self.validation_description) > len(text):
            text = f"{text:{len(self.validation_description)}}"
        return text

    def get_metrics(self, trainer, pl_module) -> dict:
        # the modules log the loss without prog_bar (Lightning would read it from the GPU every step); the bar
        # shows the value written at the last logging step
        metrics = super().get_metrics(trainer, pl_module)
        logged = trainer.logged_metrics.get("train/loss")
        if logged is not None and getattr(trainer._logger_connector, "should_update_logs", True):
            self._shown_loss = f"{float(logged):.3g}"
        if getattr(self, "_shown_loss", None) is not None:
            metrics["loss"] = self._shown_loss
        return metrics

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        super().on_train_batch_end(trainer, pl_module, outputs, batch, batch_idx)
        # Lightning sets the description once per epoch; the step count must follow every step
        if self.progress is not None and self.is_enabled and self.train_progress_bar_id is not None:
            text = self._get_train_description(trainer.current_epoch)
            style = self.theme.description
            self.progress.update(self.train_progress_bar_id, description=f"[{style}]{text}" if style else text)


class CompactModelSummary(RichModelSummary):
    """The layer table and parameter counts on stderr, without the all-zero FLOPs column.

    Replaces Lightning's default summary: set ``trainer.enable_model_summary=false`` (the trainer
    configs do) so that Lightning does not add its own next to this one.
    """

    @staticmethod
    def summarize(
        summary_data: list[tuple[str, list[str]]],
        total_parameters: int,
        trainable_parameters: int,
        model_size: float,
        total_training_modes: dict[str, int],
        total_flops: int,
        **summarize_kwargs: Any,
    ) -> None:
        from rich.console import Console
        from rich.table import Table

        console = Console(stderr=True)
        columns = [(name, values) for name, values in summary_data if not (name == "FLOPs" and not total_flops)]
        table = Table(header_style=summarize_kwargs.get("header_style", "bold magenta"))
        table.add_column(" ", style="dim")
        for name, _ in columns[1:]:
            table.add_column(name, justify="right" if name in ("Params", "FLOPs") else "left", no_wrap=name == "Name")
        for row in zip(*(values for _, values in columns)):
            table.add_row(*row)
        console.print(table)
        frozen = total_parameters - trainable_parameters
        lines = [
            f"Trainable params: {get_human_readable_count(int(trainable_parameters)).strip()}",
            f"Non-trainable params: {get_human_readable_count(int(frozen)).strip()}",
            f"Total params: {get_human_readable_count(int(total_parameters)).strip()}",
            f"Total estimated model params size (MB): {get_formatted_model_size(model_size)}",
        ]
        if total_flops:
            lines.append(f"Total FLOPs: {get_human_readable_count(total_flops).strip()}")
        console.print("\n".join(lines), highlight=False)


def progress_line(step: int, total: int | None, epoch: int, loss: float | None, rate: float | None) -> str:
    """One plain line: ``step 120/3000 (4%) · epoch 2 · loss 1.2345 · 2.31 steps/s · ETA 20m47s``."""
    parts = [f"step {step}/{total} ({100 * step / total:.0f}%)" if total else f"step {step}", f"epoch {epoch}"]
    if loss is not None:
        parts.append(f"loss {loss:.4f}")
    if rate:
        parts.append(f"{rate:.2f} steps/s")
        if total:
            parts.append(f"ETA {format_duration((total - step) / rate)}")
    return " · ".join(parts)


def median_rate(step_seconds) -> float | None:
    """Steps per second from the durations of recent steps: 1 / their median. A pause (an evaluation, a KMeans, a
    checkpoint, the restore of a resumed run) is one long step among many and barely moves the median; the mean
    rate since the last line fell to 0.02 steps/s after one AECL evaluation on the CPU and announced an ETA of
    3 h for 6 min of training left."""
    durations = [d for d in step_seconds if d > 0]
    return 1.0 / statistics.median(durations) if durations else None


class PlainProgressLines(Callback):
    """Training progress as plain log lines every ``every_seconds`` (and at the last step), for output
    that is not a terminal (a SLURM log, ``nohup``, CI), where the progress bar draws nothing until the
    run ends. The lines go through the ``logging`` module: to stderr and to the run's log file. The speed and
    the ETA are those of training steps (``median_rate`` of the last ``RECENT_STEPS``): pauses for evaluations
    are not in them.

    Args:
        every_seconds: seconds between two lines (> 0).
        when: ``no_terminal`` (only when stderr is not a terminal; the bar serves a terminal) or ``always``.
    """

    WHEN = ("no_terminal", "always")
    RECENT_STEPS = 100  # the speed is the median of this many recent steps

    def __init__(self, every_seconds: float = 30.0, when: str = "no_terminal"):
        if not every_seconds > 0:
            raise ValueError(f"every_seconds must be > 0, got {every_seconds}")
        if when not in self.WHEN:
            raise ValueError(f"when must be one of {self.WHEN}, got '{when}'")
        self.every_seconds = float(every_seconds)
        self.when = when
        self._active = False
        self._last_time: float | None = None  # when the last line was written
        self._previous: tuple[float, int] | None = None  # (time, global step) at the last step seen
        self._step_seconds: deque[float] = deque(maxlen=self.RECENT_STEPS)  # durations of the recent steps

    def on_train_start(self, trainer, pl_module) -> None:
        self._active = trainer.is_global_zero and (self.when == "always" or not stderr_is_terminal())
        self._last_time = time.monotonic()
        self._previous = None  # set when the first batch starts: the start-up is not a step's time
        self._step_seconds.clear()

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx) -> None:
        # the callbacks' work before the first step (embedding the corpus, KMeans) took minutes at 1M texts and
        # was counted as the first step's duration ("0.01 steps/s · ETA 53m31s" after step 1)
        if self._active and self._previous is None:
            self._previous = (time.monotonic(), trainer.global_step)

    def total_steps(self, trainer) -> int | None:
        return trainer_step_budget(trainer)

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        if not self._active:
            return
        now, step, total = time.monotonic(), trainer.global_step, self.total_steps(trainer)
        if self._previous is None:  # no batch start seen: this step's duration is unknown
            self._previous = (now, step)
        previous_time, previous_step = self._previous
        if step > previous_step:  # with gradient accumulation, only every k-th batch makes a step
            self._step_seconds.extend([(now - previous_time) / (step - previous_step)] * (step - previous_step))
            self._previous = (now, step)
        if now - self._last_time < self.every_seconds and step != total:
            return
        rate = median_rate(self._step_seconds)
        loss = trainer.callback_metrics.get("train/loss")
        log.info(progress_line(step, total, trainer.current_epoch, float(loss) if loss is not None else None, rate))
        self._last_time = now
