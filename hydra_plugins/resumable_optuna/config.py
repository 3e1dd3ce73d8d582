"""The sweeper's settings (``hydra/sweeper=resumable_optuna``) and its samplers (``hydra/sweeper/sampler=<name>``),
registered in Hydra's config store.

The keys are those of Hydra's Optuna sweeper plugin (``direction``, ``storage``, ``study_name``, ``n_trials``,
``n_jobs``, ``max_failure_rate``, ``params``, ``custom_search_space``, ``sampler.*``), so configs written for it keep
working; the samplers are today's Optuna's. A sampler setting left ``null`` is not passed (Optuna's own default).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional

from hydra.core.config_store import ConfigStore
from omegaconf import MISSING


@dataclass
class SamplerConf:
    _target_: str = MISSING
    seed: Optional[int] = None


@dataclass
class _NoStartupConf(SamplerConf):
    """A sampler without startup trials. ``n_startup_trials`` is accepted, and not used, so that the conf/hparams_search
    files (which set it for TPE) can switch to this sampler: ``hydra/sweeper/sampler=random``."""

    n_startup_trials: Optional[int] = None


@dataclass
class TPESamplerConf(SamplerConf):
    """Multivariate TPE; ``constant_liar`` null: on when trials may run at the same time (``n_jobs`` > 1, or a
    storage that other drivers may share), so that a running trial's neighbourhood is not drawn again."""

    _target_: str = "optuna.samplers.TPESampler"
    n_startup_trials: int = 10
    n_ei_candidates: int = 24
    multivariate: bool = True
    group: bool = False
    constant_liar: Optional[bool] = None
    warn_independent_sampling: Optional[bool] = None
    prior_weight: Optional[float] = None
    consider_magic_clip: Optional[bool] = None
    consider_endpoints: Optional[bool] = None


@dataclass
class GPSamplerConf(SamplerConf):
    """Gaussian-process Bayesian optimisation (Optuna >= 3.6; it uses torch, which the project has)."""

    _target_: str = "optuna.samplers.GPSampler"
    n_startup_trials: int = 10
    deterministic_objective: bool = False


@dataclass
class RandomSamplerConf(_NoStartupConf):
    _target_: str = "optuna.samplers.RandomSampler"


@dataclass
class GridSamplerConf(_NoStartupConf):
    """Every combination of the search space's values (choices and ranges; no intervals); ``n_trials`` is capped at
    the grid's size."""

    _target_: str = "optuna.samplers.GridSampler"


@dataclass
class CmaEsSamplerConf(SamplerConf):
    """CMA-ES (needs the ``cmaes`` package)."""

    _target_: str = "optuna.samplers.CmaEsSampler"
    n_startup_trials: int = 1
    sigma0: Optional[float] = None
    restart_strategy: Optional[str] = None
    use_separable_cma: bool = False


@dataclass
class NSGAIISamplerConf(_NoStartupConf):
    _target_: str = "optuna.samplers.NSGAIISampler"
    population_size: int = 50
    mutation_prob: Optional[float] = None
    crossover_prob: float = 0.9
    swapping_prob: float = 0.5


@dataclass
class ResumableOptunaSweeperConf:
    _target_: str = "hydra_plugins.resumable_optuna.sweeper.ResumableOptunaSweeper"
    _recursive_: bool = False  # the sweeper builds the sampler itself (its seed, the grid, constant_liar)
    defaults: list[Any] = field(default_factory=lambda: [{"sampler": "tpe"}])
    sampler: Any = MISSING
    direction: Any = "minimize"  # or maximize, or a list of them (several objectives)
    # sqlite:///<file> (one machine), journal:<file> (a journal file on a shared file system: several machines),
    # or any database URL (postgresql+psycopg://user@host/db, mysql+pymysql://...); null: in memory, lost at the end
    storage: Optional[str] = None
    study_name: Optional[str] = None
    n_trials: int = 20  # COMPLETE trials the study should have, counted across all its drivers
    n_jobs: int = 2  # trials given to the launcher at once
    max_failure_rate: float = 0.0
    params: Optional[dict[str, str]] = None
    custom_search_space: Optional[str] = None
    # a driver's liveness, recorded for each trial it runs (Optuna's storage heartbeat; killed_trials.py)
    heartbeat_seconds: float = 30.0
    grace_seconds: float = 300.0


SAMPLERS = {"tpe": TPESamplerConf, "gp": GPSamplerConf, "random": RandomSamplerConf, "grid": GridSamplerConf,
            "cmaes": CmaEsSamplerConf, "nsgaii": NSGAIISamplerConf}

store = ConfigStore.instance()
store.store(group="hydra/sweeper", name="resumable_optuna", node=ResumableOptunaSweeperConf,
            provider="resumable_optuna")
for _name, _node in SAMPLERS.items():
    store.store(group="hydra/sweeper/sampler", name=_name, node=_node, provider="resumable_optuna")
