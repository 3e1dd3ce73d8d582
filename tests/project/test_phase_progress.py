"""Progress lines of long phases (embedding, KMeans, writing): what a terminal and a scheduler's log file show."""
from __future__ import annotations

import logging

import pytest

from textcore.console import PhaseProgress


class Clock:
    def __init__(self):
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_a_long_phase_writes_lines_with_the_rate_and_eta_then_a_closing_line(caplog):
    clock = Clock()
    with caplog.at_level(logging.INFO, logger="progress"):
        progress = PhaseProgress("embedding", 1000, "texts", every=10, first_after=5, clock=clock)
        for _ in range(10):  # 100 texts every 2 s: 50 texts/s
            clock.now += 2
            progress.advance(100)
        seconds = progress.close()
    lines = [r.getMessage() for r in caplog.records]
    # at 6 s (300 done, 700 left at 50/s = 14 s), then 10 s later at 16 s (800 done, 200 left = 4 s)
    assert lines[0] == "embedding 300 of 1,000 texts (30%) · 50 texts/s · ETA 14s"
    assert lines[1] == "embedding 800 of 1,000 texts (80%) · 50 texts/s · ETA 4s"
    assert lines[2] == "embedding: 1,000 texts done in 20s"
    assert len(lines) == 3 and seconds == 20


def test_a_short_phase_writes_nothing(caplog):
    clock = Clock()
    with caplog.at_level(logging.INFO, logger="progress"):
        with PhaseProgress("KMeans restarts", 10, "restarts", clock=clock) as progress:
            for _ in range(10):
                clock.now += 0.4
                progress.advance()
    assert caplog.records == []


def test_slow_units_keep_two_decimals_and_bad_intervals_are_refused(caplog):
    clock = Clock()
    with caplog.at_level(logging.INFO, logger="progress"):
        progress = PhaseProgress("KMeans", 10, "restarts", every=1, first_after=0, clock=clock)
        clock.now += 8
        progress.advance(2)
    assert caplog.records[0].getMessage() == "KMeans 2 of 10 restarts (20%) · 0.25 restarts/s · ETA 32s"
    with pytest.raises(ValueError, match="every"):
        PhaseProgress("x", 1, every=0)


def test_the_eta_follows_the_work_left_when_units_differ_in_cost(caplog):
    """Texts sorted by length: the first half is a third of the tokens. After it, the ETA is for the two thirds of
    the work left (at the rate of work so far), not for half of the texts."""
    clock = Clock()
    with caplog.at_level(logging.INFO, logger="progress"):
        progress = PhaseProgress("embedding", 100, "texts", every=1, first_after=0, clock=clock, total_work=300)
        clock.now += 10
        progress.advance(50, work=100)
    assert caplog.records[0].getMessage() == "embedding 50 of 100 texts (50%) · 5.00 texts/s · ETA 20s"
