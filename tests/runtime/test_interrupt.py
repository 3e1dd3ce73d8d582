"""Nothing lost on interruption (docs/reliability.md "Preemption and resume"): SIGTERM/SIGINT save a checkpoint,
write a partial results.json and exit 143/130; SLURM's requeue signal requeues and the requeued
job resumes by itself; a failed final evaluation keeps the trained checkpoint and names the
command that evaluates it (eval_only=true); a NaN loss stops before it reaches the weights;
checkpoints are written atomically (a write that fails leaves the previous file)."""
from __future__ import annotations

import errno
import json
import os
import shlex
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
import torch

from callbacks.safety.checkpointing import LastCheckpoint, NonFiniteWeightsError, atomic_save
from callbacks.safety.nonfinite import NonFiniteLossError
from ctclust.training.lifecycle import FinalEvaluationError, RunStopped
from ctclust.training.train import train
from runtime import interrupt
from tests.helpers import compose_config, toy_overrides
from tests.helpers.data_files import ROOT
from tests.helpers.resume import assert_same_tensors, slow_overrides, stop_overrides, without_timings
from textcore.errors import ConfigError, MissingFileError, OutputWriteError

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")

QUIET = ["~callbacks.report", "callbacks.checkpoint.every_n_steps=0"]


def toy(csv: Path, steps: int) -> list[str]:
    return toy_overrides(csv, steps) + QUIET


def run_script(args: list[str], env: dict | None = None, **kwargs) -> subprocess.Popen:
    environment = {**os.environ, "PROJECT_ROOT": str(ROOT), "TOKENIZERS_PARALLELISM": "false", **(env or {})}
    return subprocess.Popen([sys.executable, "run.py", *args], cwd=ROOT, env=environment, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, **kwargs)


def signal_when(proc: subprocess.Popen, beacon: Path, signum: int, timeout: float = 600) -> tuple[int, str]:
    """Send ``signum`` once ``beacon`` exists (training is under way); (exit status, stderr)."""
    deadline = time.monotonic() + timeout
    while not beacon.exists():
        if proc.poll() is not None:
            raise AssertionError(f"run ended before the signal: {proc.returncode}\n{proc.stderr.read()[-3000:]}")
        if time.monotonic() > deadline:
            proc.kill()
            raise AssertionError("training did not start in time")
        time.sleep(0.05)
    proc.send_signal(signum)
    _, stderr = proc.communicate(timeout=timeout)
    return proc.returncode, stderr


def resume_args(command: str, run_dir: Path) -> list[str]:
    """The overrides of a printed resume command, plus this test's run folder."""
    words = shlex.split(command)
    assert words[:2] == ["python", "run.py"]
    return words[2:] + [f"hydra.run.dir={run_dir}"]


# -- SIGTERM from outside -------------------------------------------------------------------------------
@pytest.mark.slow
def test_sigterm_saves_exits_143_and_the_resumed_run_matches(toy_corpus, tmp_path):
    overrides = toy(toy_corpus, 16) + slow_overrides(0.15, tmp_path / "beacon")
    proc = run_script(overrides + [f"hydra.run.dir={tmp_path / 'part'}"])
    status, stderr = signal_when(proc, tmp_path / "beacon", signal.SIGTERM)
    assert status == 143, stderr[-3000:]
    assert "Traceback" not in stderr
    partial = json.loads((tmp_path / "part" / "results.json").read_text())
    step = partial["checkpoint_step"]
    assert partial["status"] == "interrupted" and partial["signal"] == "SIGTERM" and 2 <= step < 16
    checkpoint = Path(partial["checkpoint"])
    assert checkpoint == tmp_path / "part" / "checkpoints" / "last.ckpt"
    assert torch.load(checkpoint, weights_only=False)["global_step"] == step
    assert f"interrupted by SIGTERM at step {step}" in stderr and partial["resume_command"] in stderr
    assert not list(checkpoint.parent.glob(".*.tmp"))  # no temporary file left behind

    resumed = run_script(resume_args(partial["resume_command"], tmp_path / "resumed"))
    _, stderr = resumed.communicate(timeout=900)
    assert resumed.returncode == 0, stderr[-3000:]
    train(compose_config(overrides, tmp_path / "full"))  # never stopped
    assert_same_tensors(tmp_path / "full" / "checkpoints" / "last.ckpt",
                        tmp_path / "resumed" / "checkpoints" / "last.ckpt")
    full = json.loads((tmp_path / "full" / "results.json").read_text())
    again = json.loads((tmp_path / "resumed" / "results.json").read_text())
    assert again["resumed_from"] == str(checkpoint) and again["status"] == "finished"
    assert without_timings(full["clustering"]) == without_timings(again["clustering"])


def test_sigint_exits_130_with_a_checkpoint(toy_corpus, tmp_path):
    overrides = toy(toy_corpus, 8) + stop_overrides(3) + [f"+callbacks.stop_at.signum={int(signal.SIGINT)}"]
    before = signal.getsignal(signal.SIGINT)  # SIG_IGN when pytest runs as a background job
    with pytest.raises(RunStopped, match="interrupted by SIGINT at step 3") as stopped:
        train(compose_config(overrides, tmp_path / "run"))
    assert stopped.value.exit_code == 130
    partial = json.loads((tmp_path / "run" / "results.json").read_text())
    assert partial["signal"] == "SIGINT" and partial["checkpoint_step"] == 3
    assert signal.getsignal(signal.SIGINT) is before  # handlers restored after the run


def test_signals_outside_training_or_repeated_stop_at_once():
    with interrupt.catching_signals():
        with pytest.raises(interrupt.RunInterrupted):  # loading, first evaluation: nothing to save yet
            interrupt.request_stop(signal.SIGTERM)
        interrupt.set_phase("training")
        interrupt.request_stop(signal.SIGINT)  # the first one waits for the end of the step
        assert interrupt.pending() == signal.SIGINT
        with pytest.raises(interrupt.RunInterrupted) as again:  # Ctrl+C twice: stop now
            interrupt.request_stop(signal.SIGINT)
        assert again.value.exit_code == 130
    assert interrupt.pending() is None and interrupt.phase() == "setup"


# -- SLURM requeue --------------------------------------------------------------------------------------
@pytest.mark.slow
def test_slurm_requeue_signal_requeues_and_the_requeued_job_resumes(toy_corpus, tmp_path):
    """USR1 under SLURM: Lightning's requeue handler writes hpc_ckpt_1.ckpt into the job's state
    folder and runs `scontrol requeue <job>` (a stub here); the same command in the restarted job
    (SLURM_RESTART_COUNT=1) resumes from it without ckpt_path and cleans up when it finishes."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    calls = tmp_path / "scontrol_calls.txt"
    stub = bin_dir / "scontrol"
    stub.write_text(f"#!/bin/sh\necho \"$@\" >> {calls}\n")
    stub.chmod(0o755)
    slurm = {"SLURM_JOB_ID": "4242", "SLURM_NTASKS": "1", "SLURM_JOB_NAME": "train", "SLURM_PROCID": "0",
             "SLURM_LOCALID": "0", "SLURM_NODEID": "0", "SLURM_NODELIST": "localhost",
             "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}
    state = tmp_path / "requeue"
    overrides = toy(toy_corpus, 16) + slow_overrides(0.15, tmp_path / "beacon") + [f"preemption.state_dir={state}"]
    proc = run_script(overrides + [f"hydra.run.dir={tmp_path / 'first'}"], env=slurm)
    status, stderr = signal_when(proc, tmp_path / "beacon", signal.SIGUSR1)
    assert status == 128 + signal.SIGUSR1, stderr[-3000:]
    assert calls.read_text().split() == ["requeue", "4242"]
    partial = json.loads((tmp_path / "first" / "results.json").read_text())
    assert partial["requeued"] is True
    hpc = Path(partial["checkpoint"])
    assert hpc.name == "hpc_ckpt_1.ckpt" and hpc.parent.parent == state / "4242"
    record = json.loads((hpc.parent / "resume.json").read_text())
    assert record["checkpoint"] == str(hpc) and record["step"] == partial["checkpoint_step"]

    second = run_script(overrides + [f"hydra.run.dir={tmp_path / 'second'}"], env={**slurm, "SLURM_RESTART_COUNT": "1"})
    _, stderr = second.communicate(timeout=900)
    assert second.returncode == 0, stderr[-3000:]
    results = json.loads((tmp_path / "second" / "results.json").read_text())
    assert results["resumed_from"] == str(hpc) and results["steps"] == 16
    assert not (state / "4242").exists()  # a finished run leaves no requeue state
    train(compose_config(overrides, tmp_path / "full"))
    assert_same_tensors(tmp_path / "full" / "checkpoints" / "last.ckpt",
                        tmp_path / "second" / "checkpoints" / "last.ckpt")


# -- final evaluation and eval_only ---------------------------------------------------------------------
def test_eval_only_evaluates_a_checkpoint_without_training(toy_corpus, tmp_path):
    trained = train(compose_config(toy(toy_corpus, 4), tmp_path / "run"))
    checkpoint = tmp_path / "run" / "checkpoints" / "last.ckpt"
    before = checkpoint.read_bytes()
    evaluated = train(compose_config(toy(toy_corpus, 4) + [f"ckpt_path={checkpoint}", "eval_only=true"],
                                     tmp_path / "eval"))
    assert evaluated["eval_only"] is True and evaluated["steps"] == 4
    assert without_timings(evaluated["final"]) == without_timings(trained["final"])
    assert checkpoint.read_bytes() == before and not (tmp_path / "eval" / "checkpoints" / "last.ckpt").exists()
    with pytest.raises(ConfigError, match="ckpt_path"):
        train(compose_config(toy(toy_corpus, 4) + ["eval_only=true"], tmp_path / "no_checkpoint"))


def test_failed_final_evaluation_keeps_the_model_and_names_the_eval_only_command(toy_corpus, tmp_path, monkeypatch):
    from callbacks.evaluation.clustering_eval import ClusteringEvaluator

    def missing(self, trainer, pl_module):
        raise MissingFileError("STS file /data/sts-test.csv not found; set sts_data_dir")

    monkeypatch.setattr(ClusteringEvaluator, "on_train_end", missing)
    with pytest.raises(FinalEvaluationError) as failed:
        train(compose_config(toy(toy_corpus, 4), tmp_path / "run"))
    checkpoint = (tmp_path / "run" / "checkpoints" / "last.ckpt").resolve()
    message = str(failed.value)
    assert "sts-test.csv not found" in message and f"ckpt_path={checkpoint} eval_only=true" in message
    partial = json.loads((tmp_path / "run" / "results.json").read_text())
    assert partial["status"] == "evaluation_failed" and partial["checkpoint_step"] == 4
    assert torch.load(checkpoint, weights_only=False)["global_step"] == 4

    def kmeans_bug(self, trainer, pl_module):
        raise ValueError("n_samples=3 should be >= n_clusters=8")

    monkeypatch.setattr(ClusteringEvaluator, "on_train_end", kmeans_bug)
    with pytest.raises(ValueError) as bug:  # a bug keeps its traceback, with the command as a note
        train(compose_config(toy(toy_corpus, 4), tmp_path / "bug"))
    assert any("eval_only=true" in note for note in getattr(bug.value, "__notes__", []))

    monkeypatch.undo()  # the fixed evaluation, on the kept checkpoint
    results = train(compose_config(toy(toy_corpus, 4) + [f"ckpt_path={checkpoint}", "eval_only=true"],
                                   tmp_path / "eval"))
    assert results["final"]["step"] == 4 and 0 <= results["final"]["kmeans_acc"] <= 1


# -- non-finite loss ------------------------------------------------------------------------------------
def test_nan_loss_stops_with_the_step_terms_and_texts_and_keeps_the_last_good_checkpoint(toy_corpus, tmp_path,
                                                                                          monkeypatch):
    import lightning_modules.sccl.module as sccl

    real, calls = sccl.nt_xent, []

    def poisoned(*args, **kwargs):
        calls.append(1)
        loss = real(*args, **kwargs)
        return loss * float("nan") if len(calls) == 3 else loss

    monkeypatch.setattr(sccl, "nt_xent", poisoned)
    out = tmp_path / "run"
    with pytest.raises(NonFiniteLossError) as stopped:
        train(compose_config(toy(toy_corpus, 8) + ["callbacks.checkpoint.every_n_steps=2"], out))
    message = str(stopped.value)
    assert "step 3" in message and "instance_loss=nan" in message and "nonfinite_loss.json" in message
    report = json.loads((out / "nonfinite_loss.json").read_text())
    assert report["step"] == 3 and report["loss_terms"]["train/instance_loss"] == "nan"
    assert len(report["batch"]["text"]) == 8 and report["last_good_checkpoint_step"] == 2
    saved = torch.load(out / "checkpoints" / "last.ckpt", weights_only=False)
    assert saved["global_step"] == 2
    assert all(torch.isfinite(v).all() for v in saved["state_dict"].values() if v.is_floating_point())
    assert json.loads((out / "results.json").read_text())["status"] == "nonfinite_loss"


def test_weights_with_nan_are_never_saved_over_the_last_checkpoint(tmp_path):
    class Trainer:
        global_step = 7
        is_global_zero = True
        lightning_module = torch.nn.Linear(2, 2)

        def save_checkpoint(self, path):
            raise AssertionError("NaN weights were written")

    callback = LastCheckpoint(tmp_path)
    trainer = Trainer()
    with torch.no_grad():
        trainer.lightning_module.weight[0, 0] = float("nan")
    with pytest.raises(NonFiniteWeightsError, match="step 7"):
        callback.save(trainer)


# -- atomic writes --------------------------------------------------------------------------------------
def test_a_failed_write_leaves_the_previous_checkpoint(tmp_path, monkeypatch):
    path = tmp_path / "last.ckpt"
    atomic_save({"step": 1, "w": torch.ones(3)}, path)

    def disk_full(obj, handle, *args, **kwargs):
        handle.write(b"partial bytes")
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(torch, "save", disk_full)
    with pytest.raises(OutputWriteError, match="checkpoint .*the disk is full.*previous checkpoint .* is intact"):
        atomic_save({"step": 2, "w": torch.zeros(3)}, path)
    monkeypatch.undo()
    assert torch.load(path)["step"] == 1 and sorted(p.name for p in tmp_path.iterdir()) == ["last.ckpt"]


@pytest.mark.slow
def test_a_write_cut_short_by_the_kernel_leaves_the_previous_checkpoint(tmp_path):
    """A real failed write: the file-size limit (RLIMIT_FSIZE) makes the kernel refuse the bytes
    past 1 MB, as a full disk refuses them."""
    script = textwrap.dedent(f"""
        import resource, signal, sys, torch
        sys.path.insert(0, {str(ROOT)!r})
        from callbacks.safety.checkpointing import atomic_save
        from textcore.errors import OutputWriteError
        atomic_save({{"step": 1}}, {str(tmp_path / 'last.ckpt')!r})
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (2**20, 2**20))
        try:
            atomic_save({{"step": 2, "w": torch.zeros(2**20)}}, {str(tmp_path / 'last.ckpt')!r})
        except OutputWriteError as err:
            print(err)
        """)
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert "cannot write checkpoint" in result.stdout and "previous checkpoint" in result.stdout, result.stderr
    assert torch.load(tmp_path / "last.ckpt")["step"] == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == ["last.ckpt"]
