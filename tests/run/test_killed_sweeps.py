"""Sweeps whose driver is killed (SIGKILL: no handler runs, nothing is written on the way out) and started again with
the same command: nothing trained is lost (docs/sweeps.md "A sweep that was killed").

- Optuna: the trial that was running is run again with its number and parameters in its own folder, from its
  last.ckpt; the study ends with the requested number of COMPLETE trials, none RUNNING, no parameters drawn twice,
  and the resumed command exits 0;
- a grid multirun: the job that was killed continues from its last.ckpt, exactly: its weights equal those of the
  same job never stopped; the finished job is not run again.
"""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from ctclust.training.train import train
from tests.helpers import compose_config
from tests.helpers.processes import sigkill_when
from tests.helpers.resume import assert_same_tensors, checkpoint_tensors, slow_overrides
from tests.helpers.sweeps import ROOT, cli_env, run_cli
from tests.run.test_sweeps import read_trials, toy_cli

pytestmark = pytest.mark.slow  # each starts a sweep, kills it, starts it again: over a minute on 2 cores


def killed_while(args: list[str], checkpoint: Path, timeout: float = 600) -> None:
    """``python run.py <args>``, SIGKILLed as soon as ``checkpoint`` exists (saves are atomic: it is complete)."""
    proc = subprocess.Popen([sys.executable, "run.py", *args], cwd=ROOT, env=cli_env(), stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)
    sigkill_when(proc, checkpoint.is_file, f"{checkpoint} written", timeout)


def saved_step(path: Path) -> int:
    import torch

    return int(torch.load(path, map_location="cpu", weights_only=False)["global_step"])


def slow_cli(csv_path, tmp_path) -> list[str]:
    """8 steps of ~0.3 s, last.ckpt every 2: a window to kill a job in the middle of its training."""
    return [*toy_cli(csv_path, steps=8), "callbacks.checkpoint.every_n_steps=2",
            *slow_overrides(0.3, tmp_path / "beacon")]


def test_a_killed_optuna_sweep_started_again_finishes_its_trials(toy_corpus, tmp_path):
    pytest.importorskip("optuna", reason="the `sweep` extra (Optuna)")
    import optuna

    sweep = tmp_path / "sweep"
    args = ["hparams_search=sccl_optuna", *slow_cli(toy_corpus, tmp_path), "hydra.sweeper.n_trials=3",
            "hydra.sweeper.sampler.n_startup_trials=3", f"hydra.sweep.dir={sweep}"]
    killed_while(args, sweep / "1" / "checkpoints" / "last.ckpt")
    storage = f"sqlite:///{sweep / 'optuna.db'}"
    study = optuna.load_study(study_name="sccl", storage=storage)
    assert [t.state.name for t in study.trials] == ["COMPLETE", "RUNNING"]  # what the killed driver left
    killed_params = study.trials[1].params
    killed_at = saved_step(sweep / "1" / "checkpoints" / "last.ckpt")

    again = run_cli(args)
    assert again.returncode == 0, again.stderr[-3000:]
    study = optuna.load_study(study_name="sccl", storage=storage)
    assert [t.state.name for t in study.trials] == ["COMPLETE"] * 3  # the requested number, none RUNNING
    assert study.trials[1].params == killed_params and study.trials[1].user_attrs["killed"][0].startswith(
        "killed: its sweep driver (pid ")
    drawn = [tuple(sorted(t.params.items())) for t in study.trials]
    assert len(set(drawn)) == 3  # the resumed sampler did not draw the first session's parameters again
    results = json.loads((sweep / "1" / "results.json").read_text())
    assert results["status"] == "finished" and results["resumed_from"] == str(sweep / "1" / "checkpoints" /
                                                                              "last.ckpt")
    assert results["earlier_attempt"].endswith(f"continued from its last.ckpt (step {killed_at})")
    assert "the earlier attempt of this job was killed" in (sweep / "1" / "run.log").read_text()
    rows = read_trials(sweep)
    assert [r["status"] for r in rows] == ["complete"] * 3 and "killed: its sweep driver" in rows[1]["note"]
    assert "killed: its sweep driver" in (sweep / "trials.md").read_text().splitlines()[5]


def test_a_killed_grid_job_continues_from_its_checkpoint_exactly(toy_corpus, tmp_path):
    sweep = tmp_path / "sweep"
    overrides = slow_cli(toy_corpus, tmp_path)
    args = ["-m", *overrides, "seed=0,1", f"hydra.sweep.dir={sweep}"]
    last = sweep / "1" / "checkpoints" / "last.ckpt"
    killed_while(args, last)
    killed_at = saved_step(last)
    assert 0 < killed_at < 8
    finished = (sweep / "0" / "results.json").read_text()

    again = run_cli(args)
    assert again.returncode == 0, again.stderr[-3000:]
    assert "job 0 finished before" in again.stderr and (sweep / "0" / "results.json").read_text() == finished
    results = json.loads((sweep / "1" / "results.json").read_text())
    assert results["status"] == "finished" and results["steps"] == 8 and results["resumed_from"] == str(last)
    assert results["earlier_attempt"].startswith("killed: its process (pid ")
    log = (sweep / "1" / "run.log").read_text()
    assert f"continuing its training from {last} (step {killed_at})" in log

    train(compose_config([*overrides, "seed=1"], tmp_path / "never_stopped"))
    assert_same_tensors(tmp_path / "never_stopped" / "checkpoints" / "last.ckpt", last)
    assert checkpoint_tensors(last)  # the comparison covered tensors
