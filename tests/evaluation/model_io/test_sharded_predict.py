"""``python tools.py predict`` on several processes: shards, parts, resuming, and the same rows as one process.

The processes are real (``Trainer.predict`` with DDP on the CPU, gloo), started as ``python tools.py predict`` in a
subprocess: DDP starts its other ranks by running the command line again, which pytest's own would not survive."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import torch

from evaluation.model_io import corpus_shards as shards
from tests.helpers import compose_config
from tests.helpers.data_files import ROOT
from tests.helpers.sweeps import cli_env

RUN_OVERRIDES = ["backbone=tiny", "batch_size=32", "trainer.max_steps=2", "trainer.enable_progress_bar=false",
                 "~callbacks.progress", "dataset.callbacks.clustering_eval.every_n_steps=0",
                 "dataset.callbacks.clustering_eval.kmeans_n_init=2", "method.callbacks.centroid_init.n_init=2",
                 "callbacks.report.plots=false", "callbacks.report.html=false", "print_table=false"]
ROWS, SHARD_ROWS = 40_000, 500  # 80 shards: rank 1 of two is still busy when the test kills it


def corpus(path: Path, rows: int) -> Path:
    """The demo's texts, numbered, with a blank row every 997 rows."""
    texts = pd.read_csv(ROOT / "datamodules" / "demo_data" / "demo.csv")["text"].tolist()
    column = ["" if i % 997 == 5 else f"{texts[i % len(texts)]} {i}" for i in range(rows)]
    pd.DataFrame({"text": column}).to_csv(path, index=False)
    return path


def predict_cli(run: Path, source: Path, output: Path, *extra: str, devices: int = 1) -> subprocess.Popen:
    # one thread per process: the processes of both runs compute with the same arithmetic, and two of them do not
    # fight over the two cores of a small machine
    command = [sys.executable, "tools.py", "predict", "--run", str(run), "--input", str(source), "--output",
               str(output), "--accelerator", "cpu", "--devices", str(devices), "--shard-rows", str(SHARD_ROWS), *extra]
    return subprocess.Popen(command, cwd=ROOT, env=cli_env(OMP_NUM_THREADS="1"), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def finished(proc: subprocess.Popen, timeout: float = 300) -> subprocess.CompletedProcess:
    out, err = proc.communicate(timeout=timeout)
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def rank_pid(launcher: int, rank: int) -> int:
    """The process of ``rank`` among the children DDP's launcher (rank 0) started (Linux /proc)."""
    for child in Path(f"/proc/{launcher}/task/{launcher}/children").read_text().split():
        environ = Path(f"/proc/{child}/environ").read_bytes().split(b"\0")
        if f"LOCAL_RANK={rank}".encode() in environ:
            return int(child)
    raise AssertionError(f"no rank {rank} among the children of {launcher}")


def parts_table(folder: Path) -> pd.DataFrame:
    return pd.concat([pq.read_table(p).to_pandas() for p in sorted(folder.glob("part-*.parquet"))],
                     ignore_index=True)


def assert_same_rows(got: pd.DataFrame, expected: pd.DataFrame) -> None:
    """Every row once, the same cluster (or none), confidence and margin within 1e-6."""
    assert got["row"].tolist() == list(range(len(expected))) == expected["row"].tolist()
    assert got["cluster"].isna().equals(expected["cluster"].isna())
    assert (got["cluster"].dropna() == expected["cluster"].dropna()).all()
    for column in ("confidence", "margin"):
        assert np.allclose(got[column], expected[column], atol=1e-6, rtol=0, equal_nan=True)
    assert (got["top_words"].fillna("") == expected["top_words"].fillna("")).all()  # a blank row: none (NaN in a CSV)


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
    from ctclust.training.train import train

    out = tmp_path_factory.mktemp("run") / "sccl"
    train(compose_config(RUN_OVERRIDES, out))
    return out


@pytest.fixture(scope="module")
def one_process(tiny_run, tmp_path_factory):
    """The input, and the parts one process writes of it (the reference)."""
    folder = tmp_path_factory.mktemp("one")
    source = corpus(folder / "new.csv", ROWS)
    done = finished(predict_cli(tiny_run, source, folder / "parts"))
    assert done.returncode == 0, done.stderr[-3000:]
    return source, parts_table(folder / "parts")


# -- shards and parts, without a Trainer ---------------------------------------------------------------------------
def test_texts_of_chunks_of_any_size_become_shards_of_exactly_the_shard_size(tmp_path):
    sizes = [3, 7, 1, 12, 2]  # as a Parquet file's row groups come
    chunks, start = [], 0
    for n in sizes:
        texts = [f"t{start + i}" for i in range(n)]
        chunks.append((start, texts, np.array([t == "t4" for t in texts])))
        start += n
    source = {"path": "x", "bytes": 1, "mtime_ns": 1}
    layout = shards.split_texts(tmp_path, iter(chunks), 5, source)
    assert (layout.rows, layout.shards, layout.bounds(4)) == (25, 5, (20, 25))
    texts, blank = shards.read_text_shard(tmp_path, 0)
    assert texts == ["t0", "t1", "t2", "t3", "t4"] and blank.tolist() == [False] * 4 + [True]
    assert shards.read_text_shard(tmp_path, 4)[0] == [f"t{i}" for i in range(20, 25)]
    # a second call with the same source finds the complete set and reads nothing
    assert shards.split_texts(tmp_path, iter(()), 5, source) == layout
    assert shards.stored_layout(tmp_path, {**source, "bytes": 2}) is None


@pytest.mark.parametrize("world", [1, 2, 3, 5, 8])
def test_contiguous_blocks_give_every_shard_to_one_rank(world):
    items = list(range(3, 20))
    blocks = [shards.contiguous_block(items, world, rank) for rank in range(world)]
    assert sum(blocks, []) == items
    assert max(map(len, blocks)) - min(map(len, blocks)) <= 1


def test_a_folder_of_another_prediction_is_refused_and_parts_round_trip(tmp_path):
    plan = {"input": {"path": "a.csv"}, "shard_rows": 10, "run": "r"}
    shards.check_plan(tmp_path, plan)
    shards.check_plan(tmp_path, dict(plan))  # the same plan: a resume
    with pytest.raises(shards.ShardFolderError, match="differs in run, shard_rows"):
        shards.check_plan(tmp_path, {**plan, "shard_rows": 20, "run": "other"})
    embedding = np.arange(6, dtype=np.float32).reshape(3, 2) / 7
    shards.write_part(tmp_path, 4, {"row": [40, 41, 42], "cluster": np.array([2, -1, 0]),
                                    "confidence": [0.5, np.nan, 0.25], "margin": [0.1, np.nan, 0.2],
                                    "top_words": ["a, b", "", "c"], "embedding": embedding})
    table = shards.read_part(tmp_path, 4)
    assert table.column("cluster").to_pylist() == [2, None, 0]
    assert table.column("confidence").to_pylist() == [0.5, None, 0.25]
    assert table.schema.field("embedding").type == pa.list_(pa.float16(), 2)
    stored = np.array(table.column("embedding").to_pylist(), dtype=np.float32)
    assert np.allclose(stored, embedding, atol=1e-3)
    (tmp_path / ".part-00005.parquet.x1.tmp").write_text("a killed writer's")
    shards.remove_leftovers(tmp_path)
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []
    assert shards.pending_shards(tmp_path, shards.ShardLayout(45, 10)) == [0, 1, 2, 3]


def test_help_names_the_devices_options(capsys):
    from ctclust.commands.predict import main

    with pytest.raises(SystemExit) as exit_info:
        main(["--help"])
    shown = capsys.readouterr().out
    assert exit_info.value.code == 0
    assert all(option in shown for option in ("--accelerator", "--devices", "--num-nodes", "--embeddings"))


def test_rows_in_memory_come_from_one_process_and_embeddings_need_parquet(tmp_path):
    from evaluation.model_io.predict import PredictInputError, predict

    with pytest.raises(PredictInputError, match="one process"):
        predict("no/run", tmp_path / "x.csv", devices=2)
    with pytest.raises(PredictInputError, match="--embeddings"):
        predict("no/run", tmp_path / "x.csv", output=tmp_path / "out.csv", embeddings=True)


# -- real processes ------------------------------------------------------------------------------------------------
@pytest.mark.slow
def test_two_cpu_processes_write_exactly_the_rows_of_one(tiny_run, one_process, tmp_path):
    source, expected = one_process
    output = tmp_path / "assigned.parquet"
    done = finished(predict_cli(tiny_run, source, output, "--embeddings", devices=2))
    assert done.returncode == 0, done.stderr[-3000:]
    assert "on 2 process(es)" in done.stdout
    got = pq.read_table(output).to_pandas()
    assert_same_rows(got, expected)
    assert got["text"].iloc[1] == pd.read_csv(source, keep_default_na=False)["text"].iloc[1]
    assert len(got["embedding"].iloc[0]) == 32 and not (tmp_path / "assigned.parquet.parts").exists()


@pytest.mark.slow
def test_fewer_shards_than_processes_the_rank_without_one_waits(tiny_run, one_process, tmp_path):
    """One shard (the reference's first) on two processes: rank 1 encodes nothing, yet both reach the end together and
    the rows equal one process's."""
    source, expected = one_process
    small = tmp_path / "small.csv"
    pd.read_csv(source, keep_default_na=False).iloc[:SHARD_ROWS].to_csv(small, index=False)
    done = finished(predict_cli(tiny_run, small, tmp_path / "parts", devices=2))
    assert done.returncode == 0, done.stderr[-3000:]
    assert "1 to encode on 2 process(es)" in done.stderr
    assert_same_rows(parts_table(tmp_path / "parts"), expected.iloc[:SHARD_ROWS])


@pytest.mark.slow
def test_a_killed_rank_leaves_complete_parts_and_the_rerun_encodes_only_the_missing_ones(tiny_run, one_process,
                                                                                      tmp_path):
    """Rank 1 of two is SIGKILLed after its first part; the same command on one process then encodes exactly the
    shards without a part, leaves the others untouched, and the parts equal one process's."""
    source, expected = one_process
    folder = tmp_path / "parts"
    proc = predict_cli(tiny_run, source, folder, devices=2)
    first_of_rank1 = shards.part_path(folder, ROWS // SHARD_ROWS // 2)
    deadline = time.monotonic() + 240
    while not first_of_rank1.exists():
        assert proc.poll() is None, finished(proc).stderr[-3000:]
        assert time.monotonic() < deadline, "rank 1 wrote no part"
        time.sleep(0.01)
    os.kill(rank_pid(proc.pid, 1), signal.SIGKILL)
    assert finished(proc).returncode != 0
    before = {p.name: (p.stat().st_ino, p.stat().st_mtime_ns) for p in folder.glob("part-*.parquet")}
    missing = ROWS // SHARD_ROWS - len(before)
    assert 0 < missing < ROWS // SHARD_ROWS and not (folder / shards.COMPLETE).exists()

    resumed = finished(predict_cli(tiny_run, source, folder, devices=1))
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert f"{len(before)} complete from an earlier run, {missing} to encode on 1 process(es)" in resumed.stderr
    assert {name: (p.stat().st_ino, p.stat().st_mtime_ns) for name, p in
            ((n, folder / n) for n in before)} == before  # the complete parts were not written again
    assert_same_rows(parts_table(folder), expected)
    summary = json.loads((folder / shards.COMPLETE).read_text())
    assert summary["rows"] == ROWS and summary["assigned"] == ROWS - summary["blanks"] > 0


@pytest.mark.slow
def test_two_hundred_thousand_texts_on_two_processes_equal_one(tiny_run, tmp_path):
    source = corpus(tmp_path / "new.csv", 200_000)
    one, two = tmp_path / "one.csv", tmp_path / "two.csv"
    for output, devices in ((one, 1), (two, 2)):
        done = finished(predict_cli(tiny_run, source, output, "--shard-rows", "20000", devices=devices), 900)
        assert done.returncode == 0, done.stderr[-3000:]
    assert_same_rows(pd.read_csv(two), pd.read_csv(one))


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_on_a_gpu_the_model_and_the_assignment_run_there(tiny_run, tmp_path):
    from evaluation.model_io.predict import predict

    source = corpus(tmp_path / "new.csv", 3000)
    summary = predict(tiny_run, source, output=tmp_path / "gpu", devices=1, assign="kmeans")
    assert summary["device"].startswith("cuda")
    on_cpu = predict(tiny_run, source, output=tmp_path / "cpu", devices=1, accelerator="cpu", assign="kmeans")
    assert on_cpu["device"] == "cpu"
    gpu, cpu = parts_table(tmp_path / "gpu"), parts_table(tmp_path / "cpu")
    assert (gpu["cluster"].fillna(-1) == cpu["cluster"].fillna(-1)).mean() > 0.995  # float rounding at near ties
    assert np.allclose(gpu["confidence"], cpu["confidence"], atol=1e-4, equal_nan=True)
