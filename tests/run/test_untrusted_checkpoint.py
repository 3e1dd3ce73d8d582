"""A run folder from elsewhere is data, never code: a checkpoint with a planted payload (an object whose unpickling
runs a shell command that creates a marker file), opened through every entry point that loads a checkpoint, stops
with one line naming the file and the opt-in, and the marker never appears; with the opt-in it loads. A run config
whose ``method._target_`` names something other than a method class is one line, and nothing is called.

The entry points run in-process here (their ``main``, the API, ``train`` as run.py calls it); the console itself
(exit status, one line on stderr, no traceback) is checked in subprocesses, marked slow."""
from __future__ import annotations

import shutil
import subprocess
import sys
import warnings
from pathlib import Path

import pandas as pd
import pytest
import torch
from omegaconf import OmegaConf

from tests.helpers import compose_config
from tests.helpers.payload import plant
from tests.helpers.sweeps import cli_env
from textcore import run_folder
from textcore.errors import USER_ERROR_EXIT_CODE, find_user_error
from textcore.run_folder import RunFolder, UntrustedCheckpointError

ROOT = Path(__file__).resolve().parents[2]
RUN_OVERRIDES = ["backbone=tiny", "batch_size=16", "trainer.max_steps=2", "trainer.enable_progress_bar=false",
                 "~callbacks.progress", "dataset.callbacks.clustering_eval.every_n_steps=0",
                 "dataset.callbacks.clustering_eval.kmeans_n_init=2", "method.callbacks.centroid_init.n_init=2",
                 "callbacks.report.plots=false", "callbacks.report.html=false", "print_table=false"]
NEW_TEXTS = ["How do I revert a git commit?", "Best pizza in Naples", "Is it going to rain tomorrow?"]
pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")


@pytest.fixture(scope="module")
def demo_run(tmp_path_factory) -> Path:
    from ctclust.training.train import train

    out = tmp_path_factory.mktemp("demo") / "sccl"
    train(compose_config(RUN_OVERRIDES, out))
    return out


@pytest.fixture
def planted(demo_run, tmp_path) -> tuple[Path, Path]:
    """(a copy of the demo run whose last.ckpt holds the payload, the marker file the payload would create)."""
    copy = tmp_path / "copied_run"
    shutil.copytree(demo_run, copy)
    marker = tmp_path / "payload_ran"
    plant(RunFolder(copy).checkpoint_path(), marker)
    return copy, marker


@pytest.fixture
def new_texts(tmp_path) -> Path:
    path = tmp_path / "new.csv"
    pd.DataFrame({"text": NEW_TEXTS}).to_csv(path, index=False)
    return path


def refused_line(capsys, main, argv: list[str]) -> str:
    """The one line a command prints when it refuses (exit status 2)."""
    with pytest.raises(SystemExit) as caught:
        main(argv)
    assert caught.value.code == USER_ERROR_EXIT_CODE
    lines = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), lines
    return lines[0]


def assert_names_the_file_and_the_opt_in(line: str, run: Path) -> None:
    assert str(RunFolder(run).checkpoint_path()) in line and "system" in line, line
    assert run_folder.TRUST_OPTION in line and "trust_checkpoint=True" in line, line


# -- the commands -------------------------------------------------------------------------------------------------
def test_predict_refuses_the_run_and_its_checkpoint_then_loads_with_the_opt_in(planted, new_texts, tmp_path, capsys):
    from ctclust.commands.predict import main

    run, marker = planted
    for reference in (run, RunFolder(run).checkpoint_path()):
        line = refused_line(capsys, main, ["--run", str(reference), "--input", str(new_texts), "--output",
                                           str(tmp_path / "out.csv"), "--accelerator", "cpu", "--devices", "1"])
        assert_names_the_file_and_the_opt_in(line, run)
        assert not marker.exists() and not (tmp_path / "out.csv").exists()
    summary = main(["--run", str(run), "--input", str(new_texts), "--output", str(tmp_path / "out.csv"),
                    "--accelerator", "cpu", "--devices", "1", run_folder.TRUST_OPTION])
    assert marker.exists() and summary["assigned"] == len(NEW_TEXTS)


def test_evaluate_refuses_the_run_and_its_checkpoint(planted, tmp_path, capsys):
    from ctclust.commands.evaluate import main
    from evaluation.model_io.load import load_encoder

    run, marker = planted
    for reference in (run, RunFolder(run).checkpoint_path()):
        line = refused_line(capsys, main, ["--model", str(reference), "--tasks", "clustering",
                                           "--output", str(tmp_path / "eval")])
        assert_names_the_file_and_the_opt_in(line, run)
    assert not marker.exists()
    encoder, pooling = load_encoder(run, trust_checkpoint=True)  # what evaluate --trust-checkpoint loads
    assert marker.exists() and encoder.encode(NEW_TEXTS).shape[0] == len(NEW_TEXTS)


def test_export_refuses_the_run_and_its_checkpoint_then_exports_with_the_opt_in(planted, tmp_path, capsys):
    from ctclust.commands.export import main

    run, marker = planted
    for reference in (run, RunFolder(run).checkpoint_path()):
        line = refused_line(capsys, main, ["--run", str(reference), "--output", str(tmp_path / "export")])
        assert_names_the_file_and_the_opt_in(line, run)
    assert not marker.exists()
    info = main(["--run", str(run), "--output", str(tmp_path / "export"), run_folder.TRUST_OPTION])
    assert marker.exists() and Path(info["sentence_transformers"]).is_dir()


def test_describe_and_plots_of_a_run_without_saved_embeddings_refuse_it_then_use_the_opt_in(planted, capsys):
    """Their run's encoder embeds the texts when embeddings/after.npy is gone (a run of an earlier version)."""
    from ctclust.commands import describe, plots
    from evaluation.model_io import run_files

    run, marker = planted
    (run / run_files.EMBEDDINGS_AFTER).unlink()
    for main in (describe.main, plots.main):
        line = refused_line(capsys, main, ["--run", str(run)])
        assert_names_the_file_and_the_opt_in(line, run)
    assert not marker.exists()
    describe.main(["--run", str(run), run_folder.TRUST_OPTION])
    assert marker.exists() and (run / run_files.CLUSTERS_JSON).is_file()


# -- the Python API -----------------------------------------------------------------------------------------------
def test_the_api_raises_one_line_for_predict_and_transform_then_loads_with_the_opt_in(planted):
    from ctclust import TextClusterer

    run, marker = planted
    loaded = TextClusterer.load(run)
    for call in (loaded.predict, loaded.transform):
        with pytest.raises(UntrustedCheckpointError) as caught:
            call(NEW_TEXTS)
        assert "\n" not in str(caught.value)
        assert_names_the_file_and_the_opt_in(str(caught.value), run)
    assert not marker.exists()
    trusted = TextClusterer.load(run, trust_checkpoint=True)
    assert trusted.predict(NEW_TEXTS).shape == (len(NEW_TEXTS),) and marker.exists()
    assert trusted.transform(NEW_TEXTS).shape[0] == len(NEW_TEXTS)


# -- run.py: a resume and an eval-only run ------------------------------------------------------------------------
def run_error(overrides: list[str], out: Path) -> str:
    from ctclust.training.train import train

    with pytest.raises(Exception) as caught, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        train(compose_config(RUN_OVERRIDES + overrides, out))
    error = find_user_error(caught.value)
    assert error is not None, f"not a user error: {caught.value!r}"
    assert "\n" not in str(error)
    return str(error)


@pytest.mark.parametrize("extra", [[], ["eval_only=true"]], ids=["resume", "eval_only"])
def test_run_py_refuses_to_resume_or_evaluate_it(planted, tmp_path, extra):
    run, marker = planted
    ckpt = RunFolder(run).checkpoint_path()
    message = run_error([f"ckpt_path={ckpt}", *extra], tmp_path / "resumed")
    assert f"ckpt_path={ckpt}" in message and "system" in message and "trust_checkpoint=true" in message
    assert not marker.exists()
    assert not RunFolder(tmp_path / "resumed").results_file.exists()


def test_run_py_evaluates_it_with_the_opt_in(planted, tmp_path):
    from ctclust.training.train import train

    run, marker = planted
    ckpt = RunFolder(run).checkpoint_path()
    results = train(compose_config(RUN_OVERRIDES + [f"ckpt_path={ckpt}", "eval_only=true", "trust_checkpoint=true"],
                                   tmp_path / "evaluated"))
    assert marker.exists() and results["status"] == "finished" and results["steps"] == 2


# -- the class a run's config names -------------------------------------------------------------------------------
@pytest.mark.parametrize("target", ["os.system", "collections.OrderedDict",
                                    "lightning_modules.shared.heads.ContrastHead"])
def test_a_config_naming_no_method_class_is_one_line_and_nothing_is_called(demo_run, tmp_path, new_texts, capsys,
                                                                           monkeypatch, target):
    import os

    from ctclust import TextClusterer
    from ctclust.commands.predict import main
    from lightning_modules.shared.registry import NotAMethodError

    calls = []
    monkeypatch.setattr(os, "system", lambda *a: calls.append(a))
    run = tmp_path / "run"
    shutil.copytree(demo_run, run)
    config = RunFolder(run).config_file
    cfg = OmegaConf.load(config)
    cfg.method._target_ = target
    config.write_text(OmegaConf.to_yaml(cfg))
    assert RunFolder(run).method_target() == target
    line = refused_line(capsys, main, ["--run", str(run), "--input", str(new_texts), "--output",
                                       str(tmp_path / "out.csv"), "--accelerator", "cpu", "--devices", "1"])
    assert "method._target_" in line and f"'{target}'" in line and str(config) in line
    with pytest.raises(NotAMethodError, match="method._target_"):
        TextClusterer.load(run).transform(NEW_TEXTS)
    assert not calls


# -- each checkpoint read once ------------------------------------------------------------------------------------
def test_predict_reads_the_runs_checkpoint_once(demo_run, new_texts, tmp_path, monkeypatch):
    from ctclust.commands.predict import main

    loads = []
    original = torch.load

    def counting(f, *args, **kwargs):
        loads.append(str(f))
        return original(f, *args, **kwargs)

    monkeypatch.setattr(torch, "load", counting)
    main(["--run", str(demo_run), "--input", str(new_texts), "--output", str(tmp_path / "out.csv"),
          "--accelerator", "cpu", "--devices", "1"])
    assert loads == [str(RunFolder(demo_run).checkpoint_path())]


# -- the console --------------------------------------------------------------------------------------------------
def console(command: list[str]) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, *command], cwd=ROOT, env=cli_env(), capture_output=True, text=True,
                          timeout=600)


@pytest.mark.slow
def test_tools_predict_and_run_py_exit_with_one_line_and_no_traceback(planted, new_texts, tmp_path):
    run, marker = planted
    ckpt = RunFolder(run).checkpoint_path()
    commands = [
        ["tools.py", "predict", "--run", str(run), "--input", str(new_texts), "--output", str(tmp_path / "o.csv")],
        ["tools.py", "export", "--run", str(ckpt), "--output", str(tmp_path / "export")],
        ["tools.py", "evaluate", "--model", str(run), "--tasks", "clustering", "--output", str(tmp_path / "eval")],
        ["run.py", *RUN_OVERRIDES, f"ckpt_path={ckpt}", f"hydra.run.dir={tmp_path / 'resumed'}"],
    ]
    for command in commands:
        done = console(command)
        lines = [line for line in done.stderr.splitlines() if line.startswith("error: ")]
        assert done.returncode == USER_ERROR_EXIT_CODE, (command, done.stderr[-3000:])
        assert "Traceback" not in done.stderr and len(lines) == 1, (command, done.stderr[-3000:])
        assert str(ckpt) in lines[0] and run_folder.TRUST_OPTION in lines[0] and "system" in lines[0]
        assert not marker.exists(), command
