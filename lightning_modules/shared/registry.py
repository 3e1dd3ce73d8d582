"""Method classes from the class paths that configs and checkpoints name.

A method is found by its ``_target_`` (``conf/method/<name>.yaml``); nothing here lists methods.
Checkpoints record the class that wrote them (``module_class``). Those written before the methods had
folders record ``lightning_modules.<method>.<Class>`` (``lightning_modules.sccl.SCCL``): each method's package
re-exports its class under that name, which is also the name its config gives, so an old checkpoint's class
path is one of today's and needs no table. Module names of the flat layout that no checkpoint records
(``lightning_modules.base``, ``lightning_modules.losses_aecl``, ...) are not kept.
"""
from __future__ import annotations

import importlib

from textcore.errors import UserError


class ClassPathError(UserError, ImportError):
    """A configured or recorded class path does not name an importable class."""


def import_class(path: str) -> type:
    """The class at ``path`` (``package.module.Class`` or ``package.Class``)."""
    module_name, _, class_name = str(path).rpartition(".")
    try:
        return getattr(importlib.import_module(module_name), class_name)
    except (ImportError, AttributeError, ValueError) as err:
        raise ClassPathError(f"'{path}' does not name an importable class ({type(err).__name__}: {err}).") from err


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
