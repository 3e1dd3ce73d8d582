"""The steps a run takes: the first of max_steps and max_epochs to end it (lightning_modules.shared.step_budget)."""
from __future__ import annotations

from types import SimpleNamespace

import pytest

from lightning_modules.shared.step_budget import step_budget, trainer_step_budget, training_ends_after_batch


@pytest.mark.parametrize(
    ("max_steps", "max_epochs", "per_epoch", "expected"),
    [
        (150, -1, 39, 150),  # steps alone (the paper recipes' way)
        (150, 2, 39, 78),  # Tweet at batch 64: 2 epochs of 39 batches end it first
        (150, 2, 75, 150),  # 4,800 texts: both end it at step 150
        (150, 2, 313, 150),  # 20,000 texts: the steps
        (-1, 3, 10, 30),  # epochs alone
        (-1, 3, float("inf"), None),  # epochs of a stream of unknown length: no budget known
        (-1, -1, 10, None),  # unbounded
        (None, None, None, None),
    ],
)
def test_the_first_bound_to_be_reached_is_the_budget(max_steps, max_epochs, per_epoch, expected):
    assert step_budget(max_steps, max_epochs, per_epoch) == expected


def test_a_trainer_counts_its_batches_per_epoch_with_gradient_accumulation():
    trainer = SimpleNamespace(max_steps=150, max_epochs=2, num_training_batches=39, accumulate_grad_batches=4)
    assert trainer_step_budget(trainer) == 20  # ceil(39 / 4) = 10 steps an epoch


def fake_trainer(global_step: int, epoch: int, batch_in_epoch: int, *, max_steps=150, max_epochs=2, batches=39):
    progress = SimpleNamespace(is_last_batch=batch_in_epoch == batches, current=SimpleNamespace(ready=batch_in_epoch))
    return SimpleNamespace(should_stop=False, max_steps=max_steps, max_epochs=max_epochs, global_step=global_step,
                           current_epoch=epoch, num_training_batches=batches,
                           fit_loop=SimpleNamespace(epoch_loop=SimpleNamespace(batch_progress=progress)))


def test_the_last_batch_of_the_last_epoch_ends_training_before_max_steps():
    assert not training_ends_after_batch(fake_trainer(39, 0, 39))  # the end of the first of 2 epochs
    assert not training_ends_after_batch(fake_trainer(77, 1, 38))
    assert training_ends_after_batch(fake_trainer(78, 1, 39))  # step 78 of 150: the epochs end it
    assert training_ends_after_batch(fake_trainer(150, 3, 33, max_epochs=-1))  # max_steps
    assert not training_ends_after_batch(fake_trainer(149, 3, 32, max_epochs=-1))
