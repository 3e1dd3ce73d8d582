"""Train and evaluate a method: `python run.py method=sccl dataset=stackoverflow`.

Hydra composes conf/config.yaml; see README.md for the config groups and examples. The run itself is
``ctclust.training`` (``train.py``); this file turns its errors into what a command ends with.
"""
from __future__ import annotations

import sys

import hydra
from omegaconf import DictConfig

from ctclust.training.lifecycle import RunStopped
from ctclust.training.train import run_job
from runtime.multirun import record_sweep_failure
from textcore import console
from textcore.errors import USER_ERROR_EXIT_CODE, report_user_error_or_raise


@hydra.main(version_base="1.3", config_path="conf", config_name="config")
def main(cfg: DictConfig) -> float | None:
    console.configure()  # Lightning's log lines once, on stderr; no adverts
    try:
        return run_job(cfg)
    except RunStopped as stop:  # a signal: results.json and the message say how to resume
        if str(stop):
            print(stop, file=sys.stderr, flush=True)
        sys.exit(stop.exit_code)
    except Exception as err:  # noqa: BLE001 - re-raised unless it is (or wraps) a user error
        user_error = report_user_error_or_raise(err)
        if record_sweep_failure(cfg, user_error):  # multirun: the other jobs go on; the sweep's table lists it
            return None
        sys.exit(USER_ERROR_EXIT_CODE)


if __name__ == "__main__":
    main()
