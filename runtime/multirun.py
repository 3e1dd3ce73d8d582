"""A job's place in a multirun (``python run.py -m ...``), as the run itself sees it: whether it is one, a job that
finished before in a resumed sweep (not trained again; its objective goes to the sweeper), and the ``failed.json`` a
job that raised leaves for the sweep's tables. The Hydra callbacks around the sweep (``launching.hydra_callbacks``)
read the same files."""
from __future__ import annotations

import json
import logging
from pathlib import Path

from omegaconf import DictConfig

from runtime.preemption import command_overrides
from textcore import run_folder
from textcore.atomic_files import atomic_write_text

log = logging.getLogger(__name__)


def hydra_config():
    """Hydra's own configuration of this job (its mode, output folder, sweep), None outside a Hydra job."""
    from hydra.core.hydra_config import HydraConfig

    return HydraConfig.get() if HydraConfig.initialized() else None


def is_multirun() -> bool:
    hydra_cfg = hydra_config()
    return hydra_cfg is not None and str(hydra_cfg.mode).endswith("MULTIRUN")


def write_failure(output_dir: str | Path, err: BaseException) -> Path:
    path = Path(output_dir) / run_folder.FAILED
    atomic_write_text(path, json.dumps({"error": f"{type(err).__name__}: {err}", "type": type(err).__name__}, indent=2))
    return path


def record_sweep_failure(cfg: DictConfig, err: BaseException) -> bool:
    """In a multirun: write the job's ``failed.json`` and return True (the caller returns instead
    of exiting, so the other jobs run). In a single run: False (the caller exits with status 2)."""
    if not is_multirun():
        return False
    write_failure(cfg.paths.output_dir, err)
    return True


def finished_job(cfg: DictConfig) -> dict | None:
    """In a multirun, the results.json this job's folder holds when the job finished there before with the same
    overrides (the sweep was started again with the same ``hydra.sweep.dir``): it is not trained again, and its
    objective goes to the sweeper. None otherwise."""
    if not is_multirun():
        return None
    run = run_folder.RunFolder(str(cfg.paths.output_dir))
    path = run.results_file
    try:
        results = run.results()
    except run_folder.RunFileError:
        return None
    overrides = command_overrides()
    if not isinstance(results, dict) or results.get("status") != "finished" or overrides is None or \
            sorted(results.get("job_overrides") or []) != sorted(overrides):
        return None
    log.info("job %s finished before (%s): not run again; to run it again, move that file away or use another "
             "hydra.sweep.dir", path.parent.name, path)
    return results
