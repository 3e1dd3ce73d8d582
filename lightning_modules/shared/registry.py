"""Method classes from the class paths that configs and checkpoints name.

A method is found by its ``_target_`` (``conf/method/<name>.yaml``); nothing here lists methods.
Checkpoints record the class that wrote them (``module_class``); those written before the methods
moved into their own folders name the old module paths, which :data:`MOVED_MODULES` maps to today's.
"""
from __future__ import annotations

import importlib

from errors import UserError

# module paths of the flat layout -> where that code lives now
MOVED_MODULES = {
    "lightning_modules.encoder": "lightning_modules.shared.encoder",
    "lightning_modules.heads": "lightning_modules.shared.heads",
    "lightning_modules.distributed": "lightning_modules.shared.distributed",
    "lightning_modules.precision": "lightning_modules.shared.precision",
    "lightning_modules.base": "lightning_modules.shared.base",
    "lightning_modules.inbatch_clustering": "lightning_modules.shared.inbatch_clustering",
    "lightning_modules.attention": "lightning_modules.aecl.attention",
    "lightning_modules.losses_aecl": "lightning_modules.aecl.losses",
    "lightning_modules.losses_pairsupcon": "lightning_modules.pairsupcon.losses",
    "lightning_modules.losses_clusterns": "lightning_modules.clusterns.losses",
    "lightning_modules.losses": "lightning_modules.sccl.losses",
    "lightning_modules.sccl": "lightning_modules.sccl.module",
    "lightning_modules.aecl": "lightning_modules.aecl.module",
    "lightning_modules.pairsupcon": "lightning_modules.pairsupcon.module",
    "lightning_modules.simcse": "lightning_modules.simcse.module",
    "lightning_modules.clusterns": "lightning_modules.clusterns.module",
    # a method's own callbacks moved into its folder (run folders' config_resolved.yaml name the old paths)
    "callbacks.phases.centroid_init": "lightning_modules.sccl.callbacks.centroid_init",
    "callbacks.phases.stage_switch": "lightning_modules.aecl.callbacks.stage_switch",
    "callbacks.evaluation.attention_ns": "lightning_modules.aecl.callbacks.attention_ns",
}


class ClassPathError(UserError, ImportError):
    """A configured or recorded class path does not name an importable class."""


def import_class(path: str) -> type:
    """The class at ``path`` (``package.module.Class``), also for paths of the old flat layout."""
    module_name, _, class_name = str(path).rpartition(".")
    candidates = [module_name] + ([MOVED_MODULES[module_name]] if module_name in MOVED_MODULES else [])
    errors = []
    for name in candidates:
        try:
            return getattr(importlib.import_module(name), class_name)
        except (ImportError, AttributeError) as err:
            errors.append(f"{type(err).__name__}: {err}")
    raise ClassPathError(f"'{path}' does not name an importable class ({errors[-1]}).")


def class_path(cls: type) -> str:
    """The path a class is defined at (what checkpoints record)."""
    return f"{cls.__module__}.{cls.__qualname__}"


def same_class(a: str, b: str) -> bool:
    """Whether two class paths (old or new, package-level or module-level) name the same class."""
    if a == b:
        return True
    try:
        return import_class(a) is import_class(b)
    except ClassPathError:
        return False
