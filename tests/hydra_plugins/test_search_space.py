"""The sweeper's search space (Hydra's sweep syntax as Optuna distributions) and its samplers, chosen by config."""
from __future__ import annotations

import pytest

optuna = pytest.importorskip("optuna", reason="the `sweep` extra (Optuna)")

from optuna.distributions import CategoricalDistribution, FloatDistribution, IntDistribution  # noqa: E402

from hydra_plugins.resumable_optuna.search_space import grid_of, search_space  # noqa: E402
from hydra_plugins.resumable_optuna.sweeper import build_sampler, directions_of  # noqa: E402
from tests.run.test_sweeps import compose_with_hydra  # noqa: E402
from textcore.errors import ConfigError  # noqa: E402


def hydra_values(override: str) -> list:
    """What Hydra's own grid multirun would run for one sweep override."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    [parsed] = OverridesParser.create().parse_overrides([override])
    return list(parsed.sweep_iterator())


def test_each_sweep_syntax_becomes_its_distribution():
    space, fixed = search_space(["lr=tag(log, interval(1e-6, 1e-4))", "t=interval(0.05, 1.0)", "k=choice(16, 32, 64)",
                                 "n=range(1, 10, 2)", "s=range(0.1, 0.5, 0.1)", "b=tag(log, range(1, 65))",
                                 "w=a,b", "dataset=toy", "seed=3"])
    assert space["lr"] == FloatDistribution(1e-6, 1e-4, log=True)
    assert space["t"] == FloatDistribution(0.05, 1.0)
    assert space["k"] == CategoricalDistribution([16, 32, 64])
    assert space["w"] == CategoricalDistribution(["a", "b"])
    assert space["b"] == IntDistribution(1, 64, log=True)
    assert fixed == {"dataset": "toy", "seed": "3"}
    # a range has the values Hydra's grid multirun gives it (stop excluded)
    grid = grid_of({"n": space["n"], "s": space["s"]})
    assert grid["n"] == hydra_values("n=range(1, 10, 2)") == [1, 3, 5, 7, 9]
    assert grid["s"] == pytest.approx([float(v) for v in hydra_values("s=range(0.1, 0.5, 0.1)")])


def test_a_later_override_of_a_key_wins_as_on_hydras_command_line():
    space, fixed = search_space(["lr=interval(0.1, 1.0)", "lr=0.5"])
    assert space == {} and fixed == {"lr": "0.5"}


@pytest.mark.parametrize("override, words", [
    ("x=interval(1.0, 1.0)", "low < high"),
    ("x=tag(log, interval(0.0, 1.0))", "low > 0 on a log scale"),
    ("x=range(5, 1)", "the range has no value"),
    ("x=tag(log, range(1, 10, 2))", "log-scale range needs step 1"),
])
def test_a_search_space_that_cannot_be_sampled_names_its_key(override, words):
    with pytest.raises(ConfigError, match=words) as err:
        search_space([override])
    assert "hydra.sweeper.params.x" in str(err.value)


def test_the_grid_sampler_refuses_an_interval_with_the_way_out():
    with pytest.raises(ConfigError, match="use choice"):
        grid_of(search_space(["x=interval(0.0, 1.0)"])[0])


def sampler_of(name: str, parallel: bool = False, **extra):
    cfg = compose_with_hydra(["hparams_search=sccl_optuna", f"hydra/sweeper/sampler={name}"]).hydra.sweeper
    from omegaconf import OmegaConf

    settings = {**OmegaConf.to_container(cfg.sampler), **extra}
    space, _ = search_space([f"{k}={v}" for k, v in cfg.params.items()] if name != "grid" else
                            ["method.temperature=choice(0.1, 0.5)", "method.lr=choice(1e-5, 1e-4)"])
    return build_sampler(settings, space, seed=7, parallel=parallel)


def test_every_sampler_is_selectable_from_the_config():
    tpe = sampler_of("tpe")
    assert isinstance(tpe, optuna.samplers.TPESampler)
    assert tpe._multivariate and not tpe._constant_liar and tpe._n_startup_trials == 10  # sccl_optuna's settings
    assert sampler_of("tpe", parallel=True)._constant_liar  # trials at the same time: constant liar
    assert not sampler_of("tpe", parallel=True, constant_liar=False)._constant_liar  # unless set
    assert isinstance(sampler_of("gp"), optuna.samplers.GPSampler)
    assert isinstance(sampler_of("random"), optuna.samplers.RandomSampler)
    grid = sampler_of("grid")
    assert isinstance(grid, optuna.samplers.GridSampler) and len(grid._all_grids) == 4


def test_a_study_of_the_grid_sampler_visits_every_point_once():
    space, _ = search_space(["x=choice(1, 2, 3)", "y=range(0, 2)"])
    study = optuna.create_study(sampler=build_sampler({"_target_": "optuna.samplers.GridSampler"}, space, 0, False))
    seen = set()
    for _ in range(6):
        trial = study.ask()
        seen.add((trial.suggest_categorical("x", [1, 2, 3]), trial.suggest_int("y", 0, 1)))
        try:
            study.tell(trial, 0.0)
        except RuntimeError as err:  # the grid is done: GridSampler stops the study (the sweeper's loop goes on)
            assert "Study.stop" in str(err) and len(seen) == 6
    assert seen == {(x, y) for x in (1, 2, 3) for y in (0, 1)}
    assert [t.state.name for t in study.trials] == ["COMPLETE"] * 6


def test_directions():
    assert directions_of("maximize") == ["maximize"] and directions_of(["minimize", "maximize"]) == \
        ["minimize", "maximize"]
    with pytest.raises(ConfigError, match="minimize or maximize"):
        directions_of("up")
