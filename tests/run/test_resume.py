"""Exact resume for every method (smoke tier, tiny backbone, CPU): a run stopped at step k, in the
middle of an epoch or at its end, and resumed from its checkpoint ends with the same weights and
optimizer state (torch.equal on every tensor), the same logged training values and the same
evaluations as a run that never stopped. docs/reliability.md "Preemption and resume"."""
from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
import torch

from ctclust.training.train import train
from tests.helpers import compose_config, toy_overrides
from tests.helpers.data_files import write_csv
from tests.helpers.resume import (
    assert_same_tensors,
    logged_rows,
    record_overrides,
    run_interrupted,
    snapshot_overrides,
    without_timings,
)

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")

WORDS = "river bank money loan music guitar drum song field goal team match cat dog park rain".split()


def write_wiki(path: Path, n: int = 40) -> Path:
    rng = random.Random(0)
    path.write_text("\n".join(" ".join(rng.sample(WORDS, 5)) + f" {i}" for i in range(n)) + "\n")
    return path


def write_sts(root: Path, n: int = 12) -> Path:
    """SentEval STS-B dev and test files (the other STS tasks are absent and skipped)."""
    rng = random.Random(1)
    folder = root / "STS" / "STSBenchmark"
    folder.mkdir(parents=True, exist_ok=True)
    for split in ("dev", "test"):
        rows = [f"g\tf\ty\t{i:04d}\t{rng.uniform(0, 5):.2f}\t{' '.join(rng.sample(WORDS, 4))}\t"
                f"{' '.join(rng.sample(WORDS, 4))}" for i in range(n)]
        (folder / f"sts-{split}.csv").write_text("\n".join(rows) + "\n")
    return root


def write_nli(path: Path, n: int = 20) -> Path:
    rng = random.Random(2)
    labels = ["entailment", "contradiction"]
    rows = [[" ".join(rng.sample(WORDS, 5)), " ".join(rng.sample(WORDS, 4)), rng.choice(labels)] for _ in range(n)]
    return write_csv(path, ["sentence1", "sentence2", "gold_label"], rows)


# on top of tests.helpers.toy_overrides (short texts) or PLAIN (the others)
COMMON = ["~callbacks.report", "callbacks.checkpoint.every_n_steps=0"]
PLAIN = ["trainer.log_every_n_steps=1", "trainer.enable_progress_bar=false", "trainer.enable_model_summary=false",
         "~callbacks.progress", "print_table=false", *COMMON]


def method_overrides(method: str, tmp: Path, toy: Path) -> tuple[list[str], int, int, int]:
    """(overrides, N steps, k in the middle of an epoch, k at the end of an epoch)."""
    if method == "sccl":  # 36 texts, batch 8: 5 steps per epoch
        return toy_overrides(toy, 9) + COMMON + ["dataset.callbacks.clustering_eval.every_n_steps=3"], 9, 3, 5
    if method == "aecl":  # batch 12: 3 steps per epoch; stage 1 = epoch 0, stage 2 = epochs 1-2, stage 3 after
        base = [o for o in toy_overrides(toy) if not o.startswith(("method.callbacks.centroid_init", "batch_size",
                                                                   "trainer.max_steps"))]
        return base + COMMON + ["method=aecl", "batch_size=12", "method.e1=1", "method.e2=2",
                                "method.callbacks.stage_switch.kmeans_n_init=2", "trainer.max_steps=11",
                                "trainer.max_epochs=-1",  # 11 steps are 4 epochs: past the CPU default's 2
                                "dataset.callbacks.clustering_eval.every_n_steps=3"], 11, 5, 6
    sts = write_sts(tmp / "senteval")
    if method in ("simcse", "clusterns"):  # 40 sentences, batch 8: 5 steps per epoch
        wiki = write_wiki(tmp / "wiki.txt")
        extra = ["method.num_clusters=4", "method.kmean_cosine=1.0"] if method == "clusterns" else []
        return [f"method={method}", "dataset=wiki", "backbone=tiny", f"data_dir={tmp}", f"dataset.path={wiki}",
                f"sts_data_dir={sts}", "batch_size=8", "dataset.buffer_size=16", "trainer.max_steps=8",
                "method.callbacks.sts_selection.every_n_steps=3", "method.callbacks.sts_selection.patience=0",
                *extra, *PLAIN], 8, 3, 5
    if method == "pairsupcon":  # 20 pairs, batch 4: 5 steps per epoch
        nli = write_nli(tmp / "nli.csv")
        return ["method=pairsupcon", "dataset=nli", "backbone=tiny", f"data_dir={tmp}", f"dataset.file={nli.name}",
                f"sts_data_dir={sts}", "batch_size=4", "trainer.max_steps=8", "method.lr=1e-3", *PLAIN], 8, 3, 5
    raise ValueError(method)


def assert_same_continuation(full: Path, resumed: Path, k: int) -> None:
    """Weights, optimizer state, training values logged after step k, and evaluations agree."""
    assert_same_tensors(full / "checkpoints" / "last.ckpt", resumed / "checkpoints" / "last.ckpt")
    logged_full, logged_resumed = logged_rows(full), logged_rows(resumed)
    after = sorted(s for s in logged_full if s >= k)
    assert after and {s: logged_full[s] for s in after} == {s: logged_resumed.get(s) for s in after}
    a = json.loads((full / "results.json").read_text())
    b = json.loads((resumed / "results.json").read_text())
    for key in ("steps", "epochs", "clustering", "sts_selection", "sts", "attention"):
        assert without_timings(a.get(key)) == without_timings(b.get(key)), key


def batches(path: Path) -> list:
    return [json.loads(line) for line in path.read_text().splitlines()]


@pytest.mark.parametrize("method", ["sccl", "aecl", "simcse", "clusterns", "pairsupcon"])
def test_resume_mid_epoch_and_at_epoch_end_is_exact(method, toy_corpus, tmp_path):
    """k_mid: the state LastCheckpoint writes in the middle of an epoch (a periodic save), taken
    from the uninterrupted run; k_end: a real stop (a signal during the epoch's last step), which
    saves at the end of the epoch, writes a partial results.json and exits 143."""
    overrides, n, k_mid, k_end = method_overrides(method, tmp_path, toy_corpus)
    full, snaps = tmp_path / "full", tmp_path / "snaps"
    train(compose_config(overrides + snapshot_overrides(snaps, [k_mid]) + record_overrides(tmp_path / "f.txt"), full))
    seen_full = batches(tmp_path / "f.txt")
    assert len(seen_full) == n
    stopped = run_interrupted(train, compose_config, overrides, tmp_path / "part", k_end)
    partial = json.loads((tmp_path / "part" / "results.json").read_text())
    assert partial["signal"] == "SIGTERM" and partial["training_finished"] is False
    assert partial["resume_command"].endswith(f"ckpt_path={stopped.resolve()}")
    for k, ckpt in ((k_mid, snaps / f"step{k_mid}.ckpt"), (k_end, stopped)):
        resumed = tmp_path / f"resumed_{k}"
        trace = tmp_path / f"r{k}.txt"
        train(compose_config(overrides + record_overrides(trace) + [f"ckpt_path={ckpt}"], resumed))
        # the same batches at the same (step, epoch, batch index): nothing repeated or skipped
        assert batches(trace) == seen_full[k:], k
        assert_same_continuation(full, resumed, k)
    state = torch.load(full / "checkpoints" / "last.ckpt", weights_only=False)["state_dict"]
    mid = torch.load(snaps / f"step{k_mid}.ckpt", weights_only=False)["state_dict"]
    if method == "aecl":  # both stops are in stage 2 (k_end: its first epoch's end); the run ends in stage 3
        assert int(mid["training_stage"]) == 2 and int(state["training_stage"]) == 3
        assert int(torch.load(stopped, weights_only=False)["state_dict"]["training_stage"]) == 2
    if method == "clusterns":  # clustering started at the first step, before both stops
        assert bool(mid["clustering_started"]) and not torch.equal(mid["centroids"], state["centroids"])


def test_checkpoints_lightning_resumes_wrongly_are_repaired(toy_corpus, tmp_path):
    """AECL (its stage switch runs at every epoch start): checkpoints written after an epoch's last
    batch (on_train_batch_end, ModelCheckpoint every_n_train_steps), in on_train_epoch_end, and in
    on_train_end in the middle of an epoch (ModelCheckpoint(save_last), the old last.ckpt) resume
    as the uninterrupted run once LastCheckpoint has rewritten their loop state."""
    overrides, n, _, _ = method_overrides("aecl", tmp_path, toy_corpus)
    snaps = tmp_path / "snaps"
    train(compose_config(overrides + snapshot_overrides(snaps, [6], epoch_ends=[1]) + record_overrides(tmp_path / "f"),
                         tmp_path / "full"))
    short = [o for o in overrides if not o.startswith("trainer.max_steps")] + ["trainer.max_steps=5"]
    train(compose_config(short + ["+callbacks.end._target_=tests.helpers.resume.SaveAtTrainEnd",
                                  f"+callbacks.end.path={snaps / 'train_end.ckpt'}"], tmp_path / "short"))
    cases = {"after_last_batch": (snaps / "step6.ckpt", 6), "epoch_end": (snaps / "epoch1_end.ckpt", 6),
             "train_end": (snaps / "train_end.ckpt", 5)}
    for name, (ckpt, k) in cases.items():
        trace = tmp_path / f"{name}.txt"
        train(compose_config(overrides + record_overrides(trace) + [f"ckpt_path={ckpt}"], tmp_path / name))
        assert batches(trace) == batches(tmp_path / "f")[k:], name
        assert_same_continuation(tmp_path / "full", tmp_path / name, k)


@pytest.mark.slow
def test_ddp_two_processes_resume_exactly(toy_corpus, tmp_path):
    """trainer=ddp with 2 CPU processes: each rank's sampler shard resumes at its own position."""
    import os
    import subprocess
    import sys

    from tests.helpers.data_files import ROOT

    def cli(args, out):
        env = dict(os.environ, PROJECT_ROOT=str(ROOT), TOKENIZERS_PARALLELISM="false")
        return subprocess.run([sys.executable, "run.py", *args, f"hydra.run.dir={out}"], cwd=ROOT, env=env,
                              capture_output=True, text=True, timeout=1800)

    overrides = toy_overrides(toy_corpus, 8) + COMMON + [
        "trainer=ddp", "trainer.accelerator=cpu", "trainer.devices=2", "batch_size=6",
        "dataset.callbacks.clustering_eval.every_n_steps=4"]
    full = cli(overrides, tmp_path / "full")
    assert full.returncode == 0, full.stderr[-3000:]
    part = cli(overrides + ["+callbacks.stop_at._target_=tests.helpers.resume.StopAt", "+callbacks.stop_at.step=4"],
               tmp_path / "part")
    assert part.returncode == 143, part.stderr[-3000:]
    ckpt = json.loads((tmp_path / "part" / "results.json").read_text())["checkpoint"]
    resumed = cli(overrides + [f"ckpt_path={ckpt}"], tmp_path / "resumed")
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert_same_continuation(tmp_path / "full", tmp_path / "resumed", 4)
