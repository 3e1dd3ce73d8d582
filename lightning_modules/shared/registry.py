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
import re

from textcore.errors import UserError

# where the project's methods and the extensions docs/extending.md describes live: lightning_modules/<name>/
METHODS_PACKAGE = "lightning_modules"
_CLASS_PATH = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)+")


class ClassPathError(UserError, ImportError):
    """A configured or recorded class path does not name an importable class."""


class NotAMethodError(UserError, ValueError):
    """A run's config names, as its method, something that is not a method class of the project or an extension."""


def method_class(target, key: str = "method._target_") -> type:
    """The method class ``target`` names, used only when it is one: a ``LightningModule`` subclass defined in
    ``lightning_modules`` (the project's methods and extensions written as docs/extending.md shows). A run's config
    can come from elsewhere (a copied run folder), so the path's shape is checked before anything is imported, only
    modules of that package are imported, and the class is checked before it is returned; anything else raises
    ``NotAMethodError`` naming ``key`` and the value. Nothing is called or instantiated here."""
    from lightning.pytorch import LightningModule

    text = str(target) if isinstance(target, str) else repr(target)
    why = None
    if not isinstance(target, str) or not _CLASS_PATH.fullmatch(target):
        why = "it is not a dotted class path"
    elif target.split(".")[0] != METHODS_PACKAGE:
        why = f"methods are classes of the {METHODS_PACKAGE} package (an extension: {METHODS_PACKAGE}/<name>/)"
    if why is None:
        cls = import_class(target)
        if not (isinstance(cls, type) and issubclass(cls, LightningModule)) \
                or not cls.__module__.split(".")[0] == METHODS_PACKAGE:
            why = "it is not a method class (a LightningModule subclass of the project or an extension)"
        else:
            return cls
    raise NotAMethodError(f"{key}='{text}' is not used: {why}. Name a method class, e.g. "
                          "lightning_modules.sccl.module.SCCL (docs/extending.md).")


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
    if not all(str(p).startswith(METHODS_PACKAGE + ".") for p in (a, b)):  # a path read from a file imports nothing
        return False
    try:
        return import_class(a) is import_class(b)
    except ClassPathError:
        return False
