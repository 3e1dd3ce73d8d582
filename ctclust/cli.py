"""The console commands that ``pip install -e .`` puts on the PATH.

- ``ctclust-train <overrides>`` is ``python run.py <overrides>``: the same Hydra application (run.py itself is run, so
  the configuration, the job name ``run``, multirun, ``--help`` and ``--cfg`` are those of ``python run.py``), from
  any folder.
- ``ctclust-tools <command> [options]`` is ``python tools.py <command> [options]``.

The install is editable: the configuration is the checkout's ``conf/``, found beside the installed packages.
"""
from __future__ import annotations

import runpy
import sys

from textcore.checkout import CONF, ROOT


def _checkout_file(name: str) -> str:
    path = ROOT / name
    if not path.is_file() or not (CONF / "config.yaml").is_file():
        sys.exit(f"error: {path} or {CONF / 'config.yaml'} is missing: the commands run from a checkout of the "
                 "project installed with `pip install -e <checkout>` (an install from a wheel has no conf/).")
    return str(path)


def train() -> None:
    """``ctclust-train``: run.py as ``python run.py`` runs it."""
    script = _checkout_file("run.py")
    # `python run.py` has the checkout first on sys.path; Hydra looks for sweepers (hydra_plugins/) on sys.path, and
    # the editable install's import finder is invisible to that search
    sys.path.insert(0, str(ROOT))
    runpy.run_path(script, run_name="__main__")


def tools() -> None:
    """``ctclust-tools``: the commands of tools.py."""
    _checkout_file("tools.py")
    from ctclust import tools as commands

    commands.main()
