"""Multiruns through run.py: Optuna studies, the joblib and submitit launchers, SLURM settings,
the table a multirun ends with. Each test starts `python run.py -m ...` on the tiny backbone."""
import csv
import json
import os
from pathlib import Path

import pytest
from omegaconf import OmegaConf

from launching.hydra_callbacks import threads_for_job
from tests.helpers import CONF, toy_overrides
from tests.helpers.sweeps import lean_callbacks, run_cli
from textcore.device_settings import usable_cores


def toy_cli(csv_path, steps: int = 2) -> list[str]:
    overrides = toy_overrides(csv_path, steps)
    return overrides + lean_callbacks(overrides)


def compose_with_hydra(overrides: list[str]):
    """The config with its ``hydra`` node (launcher settings), as a multirun would see it."""
    from hydra import compose, initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra

    GlobalHydra.instance().clear()
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        return compose(config_name="config", overrides=overrides, return_hydra_config=True)


def read_trials(sweep) -> list[dict]:
    with open(sweep / "trials.csv") as handle:
        return list(csv.DictReader(handle))


@pytest.mark.slow
def test_optuna_study_of_three_sccl_trials(toy_corpus, tmp_path):
    pytest.importorskip("optuna", reason="the `sweep` extra (Optuna)")
    sweep = tmp_path / "sweep"
    proc = run_cli(["hparams_search=sccl_optuna", *toy_cli(toy_corpus), "hydra.sweeper.n_trials=3",
                    "hydra.sweeper.sampler.n_startup_trials=3", f"hydra.sweep.dir={sweep}"])
    assert proc.returncode == 0, proc.stderr[-3000:]
    params = ["method.lr", "method.temperature", "method.cluster_weight"]
    best = OmegaConf.load(sweep / "optimization_results.yaml")  # written by the Optuna sweeper
    assert sorted(best.best_params) == sorted(params)
    rows = read_trials(sweep)
    assert len(rows) == 3 and [r["status"] for r in rows] == ["complete"] * 3
    assert all(r["objective"] == "clustering.final.kmeans_acc" for r in rows)
    for key in params:  # every trial tried other values of every searched key
        assert len({r[key] for r in rows}) == 3
    assert best.best_value == max(float(r["value"]) for r in rows)
    for row in rows:  # the trial's value is the one its run wrote, computed with the trial's parameters
        results = json.loads((tmp_path / row["run"] / "results.json").read_text())
        assert results["objective"]["value"] == float(row["value"]) == results["final"]["kmeans_acc"]
        overrides = OmegaConf.load(tmp_path / row["run"] / ".hydra" / "overrides.yaml")
        assert f"method.lr={row['method.lr']}" in overrides  # what Optuna asked for is what the run used
    assert "Best value" in proc.stdout + proc.stderr and (sweep / "aggregate.md").is_file()
    assert "**best**" in (sweep / "trials.md").read_text()


def write_tiny_senteval(folder):
    """STS-B dev with 8 pairs: enough for a Spearman, instant to encode."""
    stsb = folder / "STS" / "STSBenchmark"
    stsb.mkdir(parents=True)
    pairs = [("A man plays guitar.", "A person plays music.", 4.2), ("A dog runs.", "A cat sleeps.", 0.8),
             ("Two kids play ball.", "Children play with a ball.", 4.6), ("A chef cooks.", "The train is late.", 0.1),
             ("A woman reads.", "A lady reads a book.", 3.9), ("People dance.", "A man swims.", 1.0),
             ("The sky is blue.", "The sky is clear and blue.", 4.4), ("He eats rice.", "Stocks fell today.", 0.3)]
    lines = [f"main-captions\tMSRvid\t2012dev\t{i:04d}\t{s}\t{a}\t{b}" for i, (a, b, s) in enumerate(pairs)]
    (stsb / "sts-dev.csv").write_text("\n".join(lines) + "\n")
    return folder


@pytest.mark.slow
def test_optuna_study_of_an_sts_method(tmp_path):
    """ClusterNS: its objective is the STS-B dev score that its checkpoint selection used."""
    pytest.importorskip("optuna", reason="the `sweep` extra (Optuna)")
    wiki = tmp_path / "wiki.txt"
    wiki.write_text("\n".join(f"sentence {i} about topic {i % 7} and word {i % 13}" for i in range(200)) + "\n")
    sweep = tmp_path / "sweep"
    args = [
        "hparams_search=clusterns_optuna", "dataset=wiki", f"dataset.path={wiki}", "dataset.buffer_size=64",
        "backbone=tiny", f"sts_data_dir={write_tiny_senteval(tmp_path / 'senteval')}", "batch_size=64",
        "trainer.max_steps=1", "method.callbacks.sts_selection.every_n_steps=1", "~method.callbacks.sts_eval",
        "print_table=false", "hydra.sweeper.n_trials=3", "hydra.sweeper.sampler.n_startup_trials=3",
        f"hydra.sweep.dir={sweep}",
    ]
    proc = run_cli(args + lean_callbacks())
    assert proc.returncode == 0, proc.stderr[-3000:]
    rows = read_trials(sweep)
    assert len(rows) == 3 and {r["objective"] for r in rows} == {"sts_selection.best"}
    values = [float(r["value"]) for r in rows]
    assert all(-1 <= v <= 1 for v in values)
    for key in ("method.momentum", "method.bml_weight", "method.hard_negative_weight"):
        assert len({r[key] for r in rows}) == 3
    results = json.loads((tmp_path / rows[0]["run"] / "results.json").read_text())
    assert results["method"] == "clusterns" and results["sts_selection"]["history"][0]["step"] == 1
    assert results["objective"]["value"] == results["sts_selection"]["best"] == values[0]
    assert OmegaConf.load(sweep / "optimization_results.yaml").best_value == max(values)


@pytest.mark.slow
def test_a_failed_job_does_not_stop_the_multirun_and_is_listed(toy_corpus, tmp_path):
    """Two jobs; the first names a missing file: the second still runs, the table lists the
    failure, and the multirun exits 2 with one line once the table is written."""
    sweep = tmp_path / "sweep"
    proc = run_cli(["-m", *toy_cli(toy_corpus), f"dataset.file=missing.csv,{toy_corpus.name}",
                    f"hydra.sweep.dir={sweep}"])
    assert proc.returncode == 2, proc.stderr[-3000:]
    assert "error: 1 job(s) of the multirun failed" in proc.stderr and "Traceback" not in proc.stderr
    assert json.loads((sweep / "1" / "results.json").read_text())["dataset"] == "toy.csv"
    assert "missing.csv" in json.loads((sweep / "0" / "failed.json").read_text())["error"]
    table = (sweep / "aggregate.md").read_text()
    assert "## Runs without results in the tables (1)" in table and "missing.csv" in table
    assert "| sccl | KMeans |" in table


@pytest.mark.slow
def test_joblib_runs_jobs_side_by_side_with_threads_divided(toy_corpus, tmp_path):
    sweep = tmp_path / "sweep"
    proc = run_cli(["-m", "hydra/launcher=joblib", "hydra.launcher.n_jobs=2", "seed=0,1", *toy_cli(toy_corpus),
                    f"hydra.sweep.dir={sweep}"])
    assert proc.returncode == 0, proc.stderr[-3000:]
    results = [json.loads(p.read_text()) for p in sorted(sweep.glob("*/results.json"))]
    assert [r["seed"] for r in results] == [0, 1]
    assert {r["torch_threads"] for r in results} == {max(1, usable_cores() // 2)}


@pytest.mark.slow
def test_submitit_local_runs_two_jobs_that_both_write_results(toy_corpus, tmp_path):
    sweep = tmp_path / "sweep"
    proc = run_cli(["-m", "hydra/launcher=submitit_local", "seed=0,1", *toy_cli(toy_corpus),
                    f"hydra.sweep.dir={sweep}"])
    assert proc.returncode == 0, proc.stderr[-3000:]
    seeds = sorted(json.loads(p.read_text())["seed"] for p in sweep.glob("*/results.json"))
    assert seeds == [0, 1]
    assert len(list((sweep / ".submitit").glob("*/*_result.pkl"))) == 2  # two submitit jobs
    saved = json.loads((sweep / "aggregate.json").read_text())
    (row, *_) = saved["clustering"]["rows"]
    assert row["cells"]["toy.csv"]["acc"]["n"] == 2 and row["cells"]["toy.csv"]["acc"]["seeds"] == [0, 1]


def test_slurm_settings_compose_into_an_sbatch_script(tmp_path, monkeypatch):
    """hydra/launcher=slurm ties tasks, GPUs and nodes to the trainer; the sbatch script says so."""
    import submitit
    from hydra.utils import instantiate

    fake = tmp_path / "bin"  # submitit looks for srun before it writes anything
    fake.mkdir()
    (fake / "srun").write_text("#!/bin/sh\nexit 0\n")
    (fake / "srun").chmod(0o755)
    monkeypatch.setenv("PATH", f"{fake}{os.pathsep}{os.environ['PATH']}")
    full = compose_with_hydra(["hydra/launcher=slurm", "trainer=ddp", "trainer.devices=4", "trainer.num_nodes=2",
                               "hydra.launcher.partition=gpu", "hydra.launcher.timeout_min=600",
                               f"hydra.sweep.dir={tmp_path}"])
    assert full.trainer.num_nodes == 2  # a trainer key, so that Lightning's SLURMEnvironment sees 8 ranks
    launcher = instantiate(full.hydra.launcher)
    launcher.setup(hydra_context=None, task_function=None, config=full)
    scripts = []

    def capture(executor, function, *args):
        scripts.append(executor._executor._make_submission_file_text("python -m submitit.core._submit x", "uid"))
        return []

    monkeypatch.setattr(submitit.AutoExecutor, "map_array", capture)
    launcher.launch([["seed=0"]], initial_job_idx=0)
    (script,) = scripts
    for line in ("--nodes=2", "--ntasks-per-node=4", "--gpus-per-node=4", "--partition=gpu", "--time=600",
                 "--signal=USR2@120"):
        assert f"#SBATCH {line}" in script
    assert launcher.params["max_num_timeout"] == 3  # requeues after a time-out


def test_plain_submitit_slurm_keys_are_settable():
    cfg = compose_with_hydra(["hydra/launcher=submitit_slurm", "hydra.launcher.gpus_per_node=4",
                              "hydra.launcher.nodes=2", "hydra.launcher.timeout_min=120",
                              "hydra.launcher.partition=debug"])
    launcher = cfg.hydra.launcher
    assert (launcher.gpus_per_node, launcher.nodes, launcher.timeout_min, launcher.partition) == (4, 2, 120, "debug")


@pytest.mark.parametrize(
    "setting, launcher, cores, expected",
    [
        (None, None, 16, None),  # a single run or the basic launcher: torch's default
        (3, None, 16, 3),
        (None, {"_target_": "hydra_plugins.hydra_joblib_launcher.joblib_launcher.JoblibLauncher", "n_jobs": 4}, 16, 4),
        (None, {"_target_": "x.JoblibLauncher", "n_jobs": -1}, 16, 1),  # -1: one job per core
        (None, {"_target_": "x.JoblibLauncher", "n_jobs": -2}, 16, 1),  # 15 jobs on 16 cores
        (None, {"_target_": "x.JoblibLauncher", "n_jobs": 8}, 2, 1),
        (None, {"_target_": "x.SlurmLauncher"}, 16, None),
    ],
)
def test_threads_per_job(setting, launcher, cores, expected):
    assert threads_for_job(setting, launcher, cores) == expected


def test_threads_per_job_must_be_positive():
    with pytest.raises(ValueError, match="threads_per_job"):
        threads_for_job(0, None, 4)


@pytest.mark.slow
def test_optuna_study_resumes_in_its_database(toy_corpus, tmp_path):
    """Three trials, the sweep ends; the same command with the same sweep folder and n_trials raised to five
    continues the study: five trials in one study in <sweep>/optuna.db, five job folders, none overwritten."""
    pytest.importorskip("optuna", reason="the `sweep` extra (Optuna)")
    import optuna

    from hydra_plugins.resumable_optuna.study_storage import sqlite_file, trials_in_storage

    assert sqlite_file("sqlite:////a/b/optuna.db") == Path("/a/b/optuna.db") and sqlite_file("postgresql://x") is None
    sweep = tmp_path / "sweep"
    base = ["hparams_search=sccl_optuna", *toy_cli(toy_corpus), "hydra.sweeper.sampler.n_startup_trials=3",
            f"hydra.sweep.dir={sweep}"]
    first = run_cli(base + ["hydra.sweeper.n_trials=3"])
    assert first.returncode == 0, first.stderr[-3000:]
    storage = f"sqlite:///{sweep / 'optuna.db'}"
    assert trials_in_storage(storage, "sccl") == 3
    runs_before = {p.name: (p / "results.json").read_text() for p in sweep.iterdir() if (p / "results.json").exists()}
    assert sorted(runs_before) == ["0", "1", "2"]
    second = run_cli(base + ["hydra.sweeper.n_trials=5"])
    assert second.returncode == 0, second.stderr[-3000:]
    assert "3 of hydra.sweeper.n_trials=5 trials complete, 2 to run" in second.stdout + second.stderr
    study = optuna.load_study(study_name="sccl", storage=storage)
    assert len(study.trials) == 5 and all(t.state == optuna.trial.TrialState.COMPLETE for t in study.trials)
    assert all((sweep / str(i) / "results.json").exists() for i in range(5))
    assert {name: (sweep / name / "results.json").read_text() for name in runs_before} == runs_before
    assert len(read_trials(sweep)) == 5


FAULTS = ["+callbacks.fault._target_=tests.helpers.faults.FailJobs", "+callbacks.fault.raise_jobs=[1]",
          "+callbacks.fault.nan_jobs=[2]"]  # job 1 raises (a bug's exception), job 2's weights turn NaN


def guarded_toy_cli(csv_path) -> list[str]:
    """toy_cli with the non-finite-loss guard every run has, which a diverging trial meets."""
    return [o for o in toy_cli(csv_path) if o != "~callbacks.nonfinite"]


@pytest.mark.slow
def test_failed_jobs_are_listed_and_a_resumed_multirun_trains_only_unfinished_jobs(toy_corpus, tmp_path):
    """Three jobs: 0 trains, 1 raises, 2 diverges to NaN. All three run; 1 and 2 are rows of the failures table
    with their error's first line. The same command again does not train job 0 (its results stay as they were)
    and runs 1 and 2 again."""
    sweep = tmp_path / "sweep"
    args = ["-m", *guarded_toy_cli(toy_corpus), "seed=0,1,2", *FAULTS, f"hydra.sweep.dir={sweep}"]
    first = run_cli(args)
    assert first.returncode != 0 and (sweep / "aggregate.md").is_file(), first.stderr[-3000:]
    assert json.loads((sweep / "0" / "results.json").read_text())["status"] == "finished"
    raised = json.loads((sweep / "1" / "failed.json").read_text())["error"]
    assert raised.startswith("RuntimeError: injected fault in job 1\n")
    diverged = json.loads((sweep / "2" / "failed.json").read_text())["error"]
    assert diverged.startswith("NonFiniteLossError: the training loss is not finite at step 2")
    table = (sweep / "aggregate.md").read_text()
    assert "| RuntimeError: injected fault in job 1 |" in table and "second line" not in table
    assert diverged.splitlines()[0][:100] in table.replace("\\|", "|")
    assert "| sccl | KMeans |" in table  # job 0's numbers, and only its: one seed in the cell
    finished = (sweep / "0" / "results.json").read_text()

    second = run_cli(args)
    assert "job 0 finished before" in second.stderr, second.stderr[-3000:]
    assert (sweep / "0" / "results.json").read_text() == finished
    assert second.stderr.count("the unfinished earlier attempt of this job") == 2  # jobs 1 and 2, again
    assert json.loads((sweep / "1" / "failed.json").read_text())["error"] == raised


@pytest.mark.slow
def test_an_optuna_study_records_failed_trials_goes_on_and_resumes_without_rerunning(toy_corpus, tmp_path):
    """Trial 1 raises and trial 2 diverges to NaN: both are FAIL in the study with their error, trial 2 still runs
    (the plugin's default stops the sweep at the first exception). The sweep resumed with n_trials=2 (COMPLETE
    trials) adds one trial and runs none of the three again; it exits 0, the trial it ran having completed, and
    notes the earlier start's failed jobs."""
    pytest.importorskip("optuna", reason="the `sweep` extra (Optuna)")
    import optuna

    sweep = tmp_path / "sweep"
    base = ["hparams_search=sccl_optuna", *guarded_toy_cli(toy_corpus), "hydra.sweeper.sampler.n_startup_trials=3",
            *FAULTS, f"hydra.sweep.dir={sweep}"]
    first = run_cli(base + ["hydra.sweeper.n_trials=3"])
    assert first.returncode == 2 and "error: 2 job(s) of the multirun failed" in first.stderr, first.stderr[-3000:]
    study = optuna.load_study(study_name="sccl", storage=f"sqlite:///{sweep / 'optuna.db'}")
    states = [t.state for t in study.trials]
    assert states == [optuna.trial.TrialState.COMPLETE, optuna.trial.TrialState.FAIL, optuna.trial.TrialState.FAIL]
    assert study.trials[1].user_attrs["error"] == "RuntimeError: injected fault in job 1"
    assert study.trials[2].user_attrs["run"] == str(sweep / "2")
    assert study.trials[2].user_attrs["error"].startswith("NonFiniteLossError: the training loss is not finite")
    rows = read_trials(sweep)
    assert [r["status"] for r in rows] == ["complete", "failed", "failed"] and rows[1]["error"] == \
        "RuntimeError: injected fault in job 1" and rows[2]["value"] == ""
    kept = {n: (sweep / n / "results.json").read_bytes() for n in ("0", "2")}

    second = run_cli(base + ["hydra.sweeper.n_trials=2"])
    assert second.returncode == 0, second.stderr[-3000:]  # the status is about the trials this start ran
    assert "note: 2 job(s) of an earlier start of this sweep, not run by this one, did not finish" in second.stderr
    study = optuna.load_study(study_name="sccl", storage=f"sqlite:///{sweep / 'optuna.db'}")
    assert len(study.trials) == 4 and study.trials[3].state == optuna.trial.TrialState.COMPLETE
    assert {n: (sweep / n / "results.json").read_bytes() for n in ("0", "2")} == kept
    assert [r["status"] for r in read_trials(sweep)] == ["complete", "failed", "failed", "complete"]


def test_a_resumed_sweep_tells_its_own_jobs_from_those_of_an_earlier_start(tmp_path):
    """The jobs a start of the sweep ran are those whose .hydra/hydra.yaml Hydra rewrote since it began; a folder
    left by a killed process is reported as killed, naming it."""
    import subprocess
    import sys
    import time

    from launching.hydra_callbacks import job_starts, started_since, unfinished_reason

    sweep = tmp_path / "sweep"
    for job in ("0", "1", "2"):
        (sweep / job / ".hydra").mkdir(parents=True)
        (sweep / job / ".hydra" / "hydra.yaml").write_text("earlier start")
    before = job_starts(sweep)
    time.sleep(0.05)
    (sweep / "1" / ".hydra" / "hydra.yaml").write_text("this start")  # Hydra starts job 1 again
    (sweep / "3" / ".hydra").mkdir(parents=True)
    (sweep / "3" / ".hydra" / "hydra.yaml").write_text("this start")  # and a new job 3
    assert started_since(sweep, before) == {"1", "3"}

    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    (sweep / "2" / "run.lock").write_text(json.dumps({"pid": gone.pid, "host": os.uname().nodename,
                                                      "process_start": "1"}))
    assert unfinished_reason(sweep / "2", "no results.json") == \
        f"killed (its process, pid {gone.pid} on host {os.uname().nodename} is gone; its run.lock is left behind)"
    assert unfinished_reason(sweep / "0", "no results.json") == "no results.json"
