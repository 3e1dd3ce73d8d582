"""Hydra's Optuna sweeper with a study that survives the sweep: stored in a database (an SQLite file in the
sweep folder by default, ``hydra.sweeper.storage``), so a restarted or requeued sweep given the same
``hydra.sweep.dir`` continues the same study.

The plugin numbers its jobs from 0 at every start; here the numbering continues after the trials already in
the study, so the job folders of an earlier session are never overwritten. Hydra takes sweepers only from
the ``hydra_plugins`` namespace, of which this folder is a portion (the repository root is on the path of
every run); the storage helpers are in ``callbacks/sweeps/optuna_sweeper.py``.
"""
from hydra_plugins.hydra_optuna_sweeper.optuna_sweeper import OptunaSweeper

from callbacks.sweeps.optuna_sweeper import sqlite_file, trials_in_storage


class ResumableOptunaSweeper(OptunaSweeper):
    def setup(self, *, hydra_context, task_function, config) -> None:
        super().setup(hydra_context=hydra_context, task_function=task_function, config=config)
        impl = self.sweeper
        path = sqlite_file(impl.storage)
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
        impl.job_idx = trials_in_storage(impl.storage, impl.study_name)
