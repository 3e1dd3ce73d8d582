"""The number a run returns to Hydra (sweepers optimise it): the `objective` config key.

``objective`` names a number in ``results.json`` by its dotted path, e.g.
``clustering.final.kmeans_acc``, ``clustering.final.head_nmi``, ``sts_selection.best``,
``sts.avg``, ``sts.dev.spearman``. Every default is **maximised** (accuracies, NMI, Spearman);
a sweep that optimises something else sets ``hydra.sweeper.direction=minimize``.

``objective: auto`` (the default) takes the method's own ``default_objective``, a class attribute declared
beside the method (``lightning_modules/<method>/module.py``; the base class in ``lightning_modules.shared.base``)
with the reason in its comment: SCCL reports KMeans ACC, AECL its clustering network's ACC, SimCSE and ClusterNS
the STS-B dev score that picked best.ckpt, PairSupCon STS-B dev of its final weights. A method without one takes
the first of ``FALLBACKS`` that the run produced.

Label-free shorthands (no labels needed; ``evaluation.clustering.label_free``): ``objective=silhouette``,
``calinski_harabasz``, ``dunn`` (maximised) and ``davies_bouldin``, ``changed`` (lower is better: the
entry's ``direction`` says ``minimize``, and a sweep over them sets ``hydra.sweeper.direction=minimize``)
stand for ``clustering.final.kmeans_<name>``. ``auto`` on a clustering run without labels falls back
to ``clustering.final.kmeans_silhouette`` and notes it.

Test scores (``sts.spearman.*``, ``sts.avg``: STS12-16, STS-B test, SICK-R; ``final_evaluation``) are never a
default (``sts.dev`` is STS-B dev):
tuning on them would report a tuned-on-test number. ``auto`` that finds no such number (e.g.
clustering without labels) gives no objective (None) and says so; ``objective: null`` turns it
off. A named objective that the run did not produce stops the run with a ``UserError`` that lists
the numbers it did produce (after results.json is written, so nothing is lost).
"""
from __future__ import annotations

import logging
from typing import Iterable, Mapping

from evaluation.clustering import catalogue
from textcore.errors import UserError
from textcore.run_folder import RESULTS, is_finite_number

log = logging.getLogger(__name__)

AUTO = "auto"
DIRECTION = "maximize"
FALLBACKS = ("clustering.final.kmeans_acc", "sts_selection.best", "sts.dev.spearman")
LABEL_FREE_FALLBACK = "clustering.final.kmeans_silhouette"
SWEEP_DIRECTIONS = {"max": "maximize", "min": "minimize"}  # the catalogue's words -> Hydra's sweeper's


def shorthands() -> dict[str, tuple[str, str]]:
    """objective=<name> -> (dotted path, direction): each label-free metric of the catalogue with a direction."""
    return {m.name: (f"clustering.final.kmeans_{m.name}", SWEEP_DIRECTIONS[m.direction])
            for m in catalogue.label_free() if m.direction}


# results.json sections written by evaluation callbacks (their ``results_key``): an objective under
# one of these can be checked before training against the callbacks the run has
CALLBACK_SECTIONS = {
    "clustering": "the clustering evaluator (dataset.callbacks.clustering_eval; short-text datasets)",
    "final": "the clustering evaluator (dataset.callbacks.clustering_eval; short-text datasets)",
    "best": "the clustering evaluator (dataset.callbacks.clustering_eval; short-text datasets)",
    "sts_selection": "STS-B dev selection (method.callbacks.sts_selection; simcse, clusterns)",
    "sts": "the final STS evaluation (method.callbacks.sts_eval; with dev=true also STS-B dev: pairsupcon)",
    "final_evaluation": "the end-of-training evaluation (method.callbacks.final_eval with tasks set)",
    "attention": "AECL's attention NS (method.callbacks.attention_ns)",
}
# the sections ``final``/``best`` are copies of clustering.final/best at the top of results.json
# (ctclust/training/results.py)
ALIASES = {"final": "clustering", "best": "clustering"}


class ObjectiveError(UserError):
    """The configured objective is not a number this run produces."""


def numeric_paths(results: Mapping, prefix: str = "") -> list[str]:
    """Dotted paths of every number in ``results`` (lists such as histories are skipped)."""
    paths = []
    for key, value in results.items():
        path = f"{prefix}{key}"
        if isinstance(value, Mapping):
            paths += numeric_paths(value, path + ".")
        elif isinstance(value, (int, float)) and not isinstance(value, bool):
            paths.append(path)
    return paths


def lookup(results: Mapping, path: str):
    """The value at a dotted ``path`` of nested dicts; KeyError naming the missing part."""
    node = results
    for i, part in enumerate(path.split(".")):
        if not isinstance(node, Mapping) or part not in node:
            raise KeyError(".".join(path.split(".")[: i + 1]))
        node = node[part]
    return node


def resolve_name(setting: str | None, default: str | None, results: Mapping) -> str | None:
    """The objective's dotted path: ``setting`` itself, or for ``auto`` the method's ``default``
    (when it declares none: the first of ``FALLBACKS`` the run produced)."""
    if setting is None or str(setting).lower() in ("null", "none", ""):
        return None
    if setting != AUTO:
        return shorthands().get(str(setting), (str(setting), None))[0]
    candidates = ([default] if default else list(FALLBACKS)) + [LABEL_FREE_FALLBACK]
    for name in candidates:
        try:
            if is_finite_number(lookup(results, name)):
                return name
        except KeyError:
            continue
    return None


def format_keys(results: Mapping, limit: int = 40) -> str:
    keys = numeric_paths(results)
    listed = ", ".join(keys[:limit]) + (f", ... ({len(keys) - limit} more)" if len(keys) > limit else "")
    return listed or "(none)"


def objective_entry(setting: str | None, default: str | None, results: Mapping, rank_zero: bool = True) -> dict:
    """What results.json records under ``objective``: name, value, direction, how it was chosen.

    A named path that is missing or not a number gives ``value: None`` and an ``error`` message
    (``raise_if_error`` turns it into an ``ObjectiveError`` once results.json is safe on disk).
    On the other ranks of a DDP run (``rank_zero`` False), where rank-0-only evaluations leave
    their sections empty, a missing number is no error: rank 0's value is the job's.
    """
    name = resolve_name(setting, default, results)
    direction = shorthands().get(str(setting), (None, DIRECTION))[1] or DIRECTION
    prefix, base = catalogue.split_prefixed(name.split(".")[-1]) if name else ("", "")
    metric = catalogue.by_name().get(base) if prefix else None  # kmeans_<metric>, head_<metric>
    if metric is not None and metric.direction:
        direction = SWEEP_DIRECTIONS[metric.direction]
    entry = {"name": name, "value": None, "direction": direction, "setting": setting}
    if name is None:
        if setting == AUTO:
            entry["note"] = f"no default objective ({default or 'none declared'}) in this run's results"
        return entry
    if setting == AUTO and name == LABEL_FREE_FALLBACK:
        entry["note"] = f"no labels: the method's default ({default or 'none declared'}) is missing, so the " \
                        "label-free silhouette is the objective"
    if not rank_zero:
        try:
            value = lookup(results, name)
            entry["value"] = float(value) if is_finite_number(value) else None
        except KeyError:
            pass
        return entry
    try:
        value = lookup(results, name)
    except KeyError as missing:
        entry["error"] = (
            f"objective '{name}': this run has no '{missing.args[0]}' in {RESULTS}. "
            f"Numbers it has: {format_keys(results)}. Set objective=<one of them> (or objective=auto)."
        )
        return entry
    if isinstance(value, Mapping):
        entry["error"] = (
            f"objective '{name}' is a section, not a number; pick one of: "
            + ", ".join(f"{name}.{k}" for k in numeric_paths(value))
        )
    elif not is_finite_number(value):
        entry["error"] = f"objective '{name}' is {value!r}, not a finite number (did its evaluation run?)"
    else:
        entry["value"] = float(value)
    return entry


def raise_if_error(entry: Mapping) -> float | None:
    """The objective value for Hydra; ``ObjectiveError`` if the entry records an error."""
    if entry.get("error"):
        raise ObjectiveError(entry["error"])
    return entry.get("value")


def check_sources(setting: str | None, result_sections: Iterable[str]) -> None:
    """Before training: an objective under a callback's section needs that callback in the run.

    ``result_sections`` are the ``results_key`` of the run's callbacks. Only sections that a known
    evaluation callback writes are checked here; anything else is checked when the run ends.
    """
    if setting is None or setting == AUTO:
        return
    section = shorthands().get(str(setting), (str(setting), None))[0].split(".")[0]
    if section not in CALLBACK_SECTIONS:
        return
    present = set(result_sections)
    if ALIASES.get(section, section) in present:
        return
    have = sorted(s for s in present if s in CALLBACK_SECTIONS)
    raise ObjectiveError(
        f"objective '{setting}' needs {CALLBACK_SECTIONS[section]}, which this run does not have; "
        f"its evaluation sections are: {', '.join(have) or '(none)'}. Set objective=auto or a key under one of them."
    )
