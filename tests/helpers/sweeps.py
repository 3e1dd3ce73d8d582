"""Running `python run.py -m ...` in a subprocess for the sweep/launcher tests."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from omegaconf import OmegaConf

ROOT = Path(__file__).resolve().parents[2]
# the general callbacks these tests keep: the others (progress bar, end-of-run plots, ...) only cost time here
KEEP_CALLBACKS = {"checkpoint", "rng_state", "empty_epoch"}


def cli_env(**extra: str) -> dict:
    env = {**os.environ, "PROJECT_ROOT": str(ROOT), "TOKENIZERS_PARALLELISM": "false", "WANDB_MODE": "offline",
           "WANDB_SILENT": "true"}
    env.pop("HYDRA_FULL_ERROR", None)
    env.update(extra)
    return env


def lean_callbacks(already: list[str] = ()) -> list[str]:
    """``~callbacks.<name>`` for every general callback not in KEEP_CALLBACKS (and not removed already)."""
    names = OmegaConf.load(ROOT / "conf" / "callbacks" / "default.yaml").keys()
    return [f"~callbacks.{n}" for n in names if n not in KEEP_CALLBACKS and f"~callbacks.{n}" not in already]


def run_cli(args: list[str], timeout: int = 900, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "run.py", *args], cwd=ROOT, env=cli_env(**env), capture_output=True,
                          text=True, timeout=timeout)
