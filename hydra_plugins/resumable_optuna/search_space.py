"""The search space of a sweep: Hydra's sweep overrides (``hydra.sweeper.params`` and the command line's) as Optuna
distributions, and the values that are fixed for every trial.

Hydra's override parser reads the syntax; this module maps what it returns:

- ``interval(a, b)``: a float in [a, b] (Hydra parses both bounds as floats); ``tag(log, interval(a, b))`` on a log
  scale;
- ``choice(x, y, ...)`` and ``x,y,...``: one of the values (categorical);
- ``range(start, stop[, step])``: the values of Hydra's range, ``stop`` excluded as in a grid multirun; integers
  when all three are integers, else floats on that step; ``tag(log, range(a, b))`` (step 1) an integer on a log
  scale; ``shuffle(range(...))`` the same values as a categorical;
- anything else (``key=value``): fixed, passed to every trial and recorded as the trial's user attribute.
"""
from __future__ import annotations

import decimal
import math
from typing import Any

from textcore.errors import ConfigError

LOG = "log"


def _number(value: Any) -> int | float:
    return float(value) if isinstance(value, (float, decimal.Decimal)) else int(value)


def _last_of_range(start, stop, step) -> int | float:
    """The last value Hydra's ``range(start, stop, step)`` yields (``stop`` excluded)."""
    count = math.ceil((stop - start) / step - 1e-9)
    if count < 1:
        raise ValueError("empty")
    return start + (count - 1) * step


def distribution_of(key: str, override) -> Any:
    """The Optuna distribution of one parsed sweep override, or its fixed value (a string) when it does not sweep."""
    from hydra.core.override_parser.types import Transformer
    from optuna.distributions import CategoricalDistribution, FloatDistribution, IntDistribution

    if not override.is_sweep_override():
        return override.get_value_element_as_str()
    value = override.value()
    where = f"hydra.sweeper.params.{key}={override.input_line or ''}".rstrip("=")
    if override.is_choice_sweep() or (override.is_range_sweep() and value.shuffle):
        choices = list(override.sweep_iterator(transformer=Transformer.encode))
        bad = [c for c in choices if not isinstance(c, (str, int, float, bool, type(None)))]
        if bad:
            raise ConfigError(f"{where}: a choice takes numbers, strings, booleans or null, not {bad[0]!r}; "
                              "write each value as one of those")
        return CategoricalDistribution(choices)
    if override.is_interval_sweep():
        low, high = float(value.start), float(value.end)
        if not low < high or (LOG in value.tags and low <= 0):
            scale = " and low > 0 on a log scale" if LOG in value.tags else ""
            raise ConfigError(f"{where}: an interval needs low < high{scale} (got {low:g}, {high:g}); "
                              "e.g. interval(0.1, 1.0)")
        return FloatDistribution(low, high, log=LOG in value.tags)
    if override.is_range_sweep():
        start, stop, step = (_number(v) for v in (value.start, value.stop, value.step))
        try:
            last = _last_of_range(start, stop, step) if step > 0 else None
        except ValueError:
            last = None
        if last is None:
            raise ConfigError(f"{where}: the range has no value (start {start}, stop {stop}, step {step}; stop is "
                              "excluded); e.g. range(1, 9, 2)")
        if all(isinstance(v, int) for v in (start, stop, step)):
            if LOG in value.tags and (step != 1 or start < 1):
                raise ConfigError(f"{where}: a log-scale range needs step 1 and start >= 1; "
                                  "e.g. tag(log, range(1, 65))")
            return IntDistribution(start, last, log=LOG in value.tags, step=1 if LOG in value.tags else step)
        if LOG in value.tags:
            raise ConfigError(f"{where}: a log scale on a float range is not supported; use tag(log, interval(a, b))")
        return FloatDistribution(float(start), float(last), step=float(step))
    raise ConfigError(f"{where}: this sweep is not supported by the Optuna sweeper; use interval(a, b), choice(...), "
                      "range(start, stop, step) or tag(log, interval(a, b))")


def search_space(overrides: list[str]) -> tuple[dict[str, Any], dict[str, str]]:
    """(name -> Optuna distribution, name -> fixed value) of ``key=value`` override strings; a later override of the
    same key wins, as on Hydra's command line."""
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from optuna.distributions import BaseDistribution

    distributions: dict[str, Any] = {}
    fixed: dict[str, str] = {}
    for override in OverridesParser.create().parse_overrides(overrides):
        key = override.get_key_element()
        found = distribution_of(key, override)
        distributions.pop(key, None)
        fixed.pop(key, None)
        if isinstance(found, BaseDistribution):
            distributions[key] = found
        else:
            fixed[key] = found
    return distributions, fixed


def grid_of(distributions: dict[str, Any]) -> dict[str, list]:
    """The values of every distribution, for Optuna's GridSampler: choices and ranges have a finite list, an interval
    has none (a ConfigError says how to give one)."""
    from optuna.distributions import CategoricalDistribution, FloatDistribution, IntDistribution

    grid = {}
    for name, dist in distributions.items():
        if isinstance(dist, CategoricalDistribution):
            grid[name] = list(dist.choices)
        elif isinstance(dist, IntDistribution) and not dist.log:
            grid[name] = list(range(dist.low, dist.high + 1, dist.step))
        elif isinstance(dist, FloatDistribution) and dist.step is not None:
            count = int(round((dist.high - dist.low) / dist.step)) + 1
            grid[name] = [round(dist.low + i * dist.step, 12) for i in range(count)]
        else:
            raise ConfigError(f"hydra.sweeper.params.{name}: the grid sampler needs a finite list of values, not an "
                              f"interval; use choice(...) or range(start, stop, step) (hydra/sweeper/sampler=grid)")
    return grid
