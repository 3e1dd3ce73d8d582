"""PhaseClock: where a run's time went (results.json ``seconds``), and a step's steady cost as the median of the
times between optimizer steps, which a slow first step or an evaluation does not move."""
from __future__ import annotations

from types import SimpleNamespace

import pytest

from ctclust.training.fit_callbacks import PhaseClock


class Clock:
    def __init__(self):
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def _fit(durations: list[float], accumulate: int = 1, start_up: float = 5.0, end: float = 3.0) -> dict:
    """A fit whose batches take ``durations`` seconds each, an optimizer step every ``accumulate`` batches."""
    clock, trainer = Clock(), SimpleNamespace(global_step=0)
    phases = PhaseClock(clock=clock)
    phases.on_fit_start(trainer, None)
    clock.now += start_up
    for index, seconds in enumerate(durations):
        phases.on_train_batch_start(trainer, None, None, index)
        clock.now += seconds
        if (index + 1) % accumulate == 0:
            trainer.global_step += 1
        phases.on_train_batch_end(trainer, None, None, None, index)
    clock.now += end
    phases.on_fit_end(trainer, None)
    return phases.seconds()


def test_the_phases_and_the_median_step_leave_out_a_slow_first_step_and_an_evaluation():
    # 9 steps of 0.1 s, the first one 4 s (a GPU's warm-up), one with a 2 s evaluation after it
    durations = [4.0] + [0.1] * 4 + [2.1] + [0.1] * 4
    seconds = _fit(durations)
    assert seconds["start_up"] == 5.0 and seconds["end"] == 3.0
    assert seconds["training"] == pytest.approx(sum(durations), abs=0.05)
    assert seconds["step_median"] == pytest.approx(0.1)


def test_accumulated_batches_make_one_step_and_a_fit_without_steps_has_no_median():
    assert _fit([0.2, 0.3] * 5, accumulate=2)["step_median"] == pytest.approx(0.5)
    assert "step_median" not in _fit([])
