"""A sampler other than TPE chosen on the command line of an hparams_search config, with the space given on the
command line (``-m key=choice(...)``, replacing the config's): the grid sampler runs every point of a finite space once
and no more, whatever n_trials asks."""
from __future__ import annotations

import pytest

from tests.helpers.sweeps import run_cli
from tests.run.test_sweeps import read_trials, toy_cli


@pytest.mark.slow
def test_the_grid_sampler_runs_each_point_of_the_space_once(toy_corpus, tmp_path):
    optuna = pytest.importorskip("optuna", reason="the `sweep` extra (Optuna)")
    sweep = tmp_path / "sweep"
    proc = run_cli(["-m", "hparams_search=sccl_optuna", "hydra/sweeper/sampler=grid", *toy_cli(toy_corpus),
                    "method.lr=choice(1e-5, 2e-5)", "method.temperature=0.5", "method.cluster_weight=range(1, 3)",
                    "hydra.sweeper.n_trials=9",
                    f"hydra.sweep.dir={sweep}"])
    assert proc.returncode == 0, proc.stderr[-3000:]
    study = optuna.load_study(study_name="sccl", storage=f"sqlite:///{sweep / 'optuna.db'}")
    points = sorted((t.params["method.lr"], t.params["method.cluster_weight"]) for t in study.trials)
    assert points == [(1e-5, 1), (1e-5, 2), (2e-5, 1), (2e-5, 2)]  # range(1, 3) is 1 and 2, as in a grid multirun
    assert all(t.state.name == "COMPLETE" and t.user_attrs["method.temperature"] == "0.5" for t in study.trials)
    assert [r["status"] for r in read_trials(sweep)] == ["complete"] * 4
