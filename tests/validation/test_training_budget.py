"""The line that states what share of the corpus the configured training draws (validation.data.training_budget)."""
from __future__ import annotations

from tests.helpers import compose_config
from validation.data import training_budget


def test_the_demo_budget_is_stated_in_epochs():
    cfg = compose_config(["trainer.max_epochs=-1"])  # 150 steps x batch 64 on one CPU process
    assert training_budget(cfg, 720) == ("training budget: 150 steps x 64 texts = 9,600 texts drawn, "
                                         "13.33 epochs of the 720 texts")


def test_on_a_small_corpus_the_default_epochs_end_training_and_the_line_says_so():
    # 720 texts at batch 64: 12 batches an epoch (the last of 16 texts), 2 epochs = 24 steps, every text twice
    assert training_budget(compose_config([]), 720) == (
        "training budget: 24 steps x 64 texts = 1,440 texts drawn, 2.00 epochs of the 720 texts "
        "(trainer.max_epochs=2 ends it before trainer.max_steps=150; trainer.max_epochs=-1 trains every step)")
    # 4,800 texts: 75 steps an epoch, 2 epochs = 150: the steps end it, as on every larger corpus
    assert training_budget(compose_config([]), 4_800).startswith(
        "training budget: 150 steps x 64 texts = 9,600 texts drawn, 2.00 epochs of the 4,800 texts")
    assert "max_epochs" not in training_budget(compose_config([]), 4_800)


def test_a_large_corpus_gets_the_share_it_sees_and_the_steps_of_one_epoch():
    cfg = compose_config(["trainer.max_steps=100", "batch_size=50"])
    line = training_budget(cfg, 1_000_000)  # 5,000 of 1,000,000 texts: 0.5 %; one epoch = 20,000 steps
    assert line.endswith("5,000 texts drawn, 0.01 epochs of the 1,000,000 texts (0.5 % of the corpus is seen once "
                         "at most); trainer.max_steps=20000 makes one epoch")


def test_every_process_draws_a_batch():
    cfg = compose_config(["trainer=ddp", "trainer.devices=4", "trainer.max_steps=10", "batch_size=25"])
    assert "10 steps x 100 texts = 1,000 texts drawn, 0.10 epochs" in training_budget(cfg, 10_000)


def test_a_budget_in_epochs_states_nothing():
    assert training_budget(compose_config(["trainer.max_steps=-1"]), 720) is None
