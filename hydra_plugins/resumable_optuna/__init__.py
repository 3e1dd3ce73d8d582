"""The project's Optuna sweeper for Hydra (``hydra/sweeper=resumable_optuna``), on today's Optuna, with a study that
survives the sweep and its driver and may be shared by drivers on several machines.

The study is stored where ``hydra.sweeper.storage`` says (``study_storage.py``): an SQLite file in the sweep folder by
default (one machine), a journal file on a shared file system (several machines, no server), or a database server's
URL. A restarted, requeued or killed sweep given the same command and ``hydra.sweep.dir`` continues the same study:

- ``hydra.sweeper.n_trials`` is the number of COMPLETE trials the study should have, counted across all its drivers
  (``sweeper.py``): a resumed sweep runs the trials that are missing (none when the study has them all). A FAIL trial
  does not count; to extend a study, raise ``n_trials``;
- a trial that a dead driver left RUNNING runs again, in its own job folder, where its job continues from its
  last.ckpt (``killed_trials.py``: Optuna's heartbeat and stale-trial handling, and what Optuna cannot know);
- the sampler of a resumed or shared study is seeded anew from the configured seed, the number of trials in the study
  and the sweep folder, so it does not draw the parameters of the first start's (or another driver's) trials again;
- each trial runs in the job folder ``<hydra.sweep.dir>/<trial number>`` (``hydra.sweep.subdir``), so the job
  folders of an earlier start are never overwritten and a trial run again finds its own;
- a trial that fails (an exception, a NaN loss, an objective that is not a number) is ``FAIL`` in the study
  (``max_failure_rate: 1.0`` in conf/hparams_search: the sweep goes on), with the first line of its error and its run
  folder as the trial's user attributes ``error`` and ``run`` (optuna-dashboard shows them).

The search space (``search_space.py``) and the settings (``config.py``) are those of Hydra's Optuna sweeper plugin,
whose published release requires Optuna < 3; this one needs none of it. Hydra takes sweepers only from the
``hydra_plugins`` namespace, of which this folder is a portion (the repository root is on the path of every run).
"""
from hydra_plugins.resumable_optuna import config  # noqa: F401 - registers hydra/sweeper=resumable_optuna
from hydra_plugins.resumable_optuna.sweeper import ResumableOptunaSweeper, resumed_seed

__all__ = ["ResumableOptunaSweeper", "resumed_seed"]
