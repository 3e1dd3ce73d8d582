"""python tools.py reproduce: the dry-run listing, and a two-row x two-seed table end to end on
the CPU."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from evaluation.across_runs import reproduce

ROOT = Path(__file__).resolve().parents[3]
TINY = ["trainer=cpu", "backbone=tiny", "batch_size=8", "max_length=16", "trainer.max_steps=2",
        "dataset.num_clusters=3", "trainer.enable_progress_bar=false", "trainer.enable_model_summary=false",
        "~callbacks.progress", "dataset.callbacks.clustering_eval.every_n_steps=2",
        "dataset.callbacks.clustering_eval.kmeans_n_init=2", "method.callbacks.centroid_init.n_init=2",
        "print_table=false", "callbacks.report.plots=false"]


def test_dry_run_lists_the_eight_rows_three_seeds_and_their_files(tmp_path, capsys):
    text = reproduce.main(["sccl_table1", "--dry-run", "--out", str(tmp_path / "out")])
    assert text.splitlines()[0].startswith("sccl_table1: SCCL (Zhang et al., NAACL 2021), Table 1: 8 rows x 3 seeds = "
                                           "24 runs")
    sets = ["agnews", "searchsnippets", "stackoverflow", "biomedical", "googlenews_ts", "googlenews_t",
            "googlenews_s", "tweet"]
    for name in sets:
        assert f"\nsccl_{name} (SCCL, {name})\n  seeds: 0 finished, 0 to resume, 3 to start\n" in text
        assert f"short_text/{name}_trans_subst_20.csv" in text
        assert f"experiment=sccl_{name} " in text and "seed=0,1,2" in text
    assert text.count("  data: ") == 8
    assert text.count("  $ python run.py --multirun") == 8
    assert "estimate:" in text
    # the untrained rows' commands
    assert "BoW, agnews: python tools.py evaluate --model bow" in text


def test_sts_rows_list_the_senteval_folder_too(tmp_path):
    text = reproduce.main(["clusterns_table1", "--rows", "simcse_bert_base", "--seeds", "0", "--dry-run",
                           "--out", str(tmp_path)])
    assert "wiki/wiki1m_for_simcse.txt" in text and "senteval/downstream" in text
    assert "1 rows x 1 seeds = 1 runs" in text


def test_a_sample_is_refused(tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_info:
        reproduce.main(["sccl_table1", "--dry-run", "--out", str(tmp_path), "dataset.sample=true"])
    assert exit_info.value.code == 2
    assert "dataset.sample=true: a paper table compares runs on the papers' corpora" in capsys.readouterr().err


def test_gpu_hours_come_from_the_benchmarks_gpu_section():
    steps_table = ["| method | backbone, batch | precision | layout | chunk tokens | cached | steps/s | tokens/s | "
                   "peak GiB | MFU | vs authors |", "|---" * 11 + "|",
                   "| sccl | distilbert-base, 400 | fp32 | authors | - | - | 1.00 | 1 | 1 | - | 1.00x |",
                   "| sccl | distilbert-base, 400 | fp32 | ours | - | - | 4.00 | 1 | 1 | - | 4.00x |"]
    end_to_end = ["End to end (`Trainer.fit`):", "",
                  "| method | backbone, batch | precision | chunk tokens | end-to-end steps/s | raw steps/s | "
                  "end-to-end / raw | loop overhead ms/step | MFU | start-up s |", "|---" * 10 + "|",
                  "| sccl | distilbert-base, 400 | fp32 | - | 2.50 | 4.00 | 0.62 | 150 | - | 9 |"]
    cfg = reproduce.compose("sccl_tweet", [])
    only_steps = reproduce.gpu_rows("\n".join([reproduce.GPU_START, *steps_table, reproduce.GPU_END]))
    assert [r["steps_per_s"] for r in only_steps] == [4.0]  # the authors' layout is not this project's run
    hours, why = reproduce.gpu_hours(cfg, only_steps)
    assert hours == pytest.approx(3000 / 4.0 / 3600) and why == "3000 steps at 4.00 steps/s"
    both = reproduce.gpu_rows("\n".join([reproduce.GPU_START, *steps_table, "", *end_to_end, reproduce.GPU_END]))
    assert reproduce.gpu_hours(cfg, both)[0] == pytest.approx(3000 / 2.5 / 3600)  # end to end preferred
    assert reproduce.gpu_hours(cfg, [])[0] is None
    assert reproduce.gpu_rows("| sccl | distilbert-base, 400 | fp32 | ours |") == []  # no GPU section: nothing
    aecl = reproduce.compose("aecl_tweet", [])  # 70 epochs of ceil(2472 / 400) = 7 steps, no figure for AECL
    assert reproduce.training_steps(aecl) == 70 * 7
    assert reproduce.gpu_hours(aecl, both)[1].startswith("no GPU figure in BENCHMARKS.md for aecl")


def write_views(folder: Path, name: str) -> None:
    """A toy <set>_trans_subst_20.csv: 3 topics x 8 texts, two views each."""
    import csv

    topics = {1: "pasta sauce oven bread", 2: "planet orbit comet star", 3: "python compiler loop array"}
    with open(folder / f"{name}_trans_subst_20.csv", "w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["label", "text", "text1", "text2"])
        for label, words in topics.items():
            for i in range(8):
                text = f"{words} {i}"
                writer.writerow([label, text, f"{words.split()[0]} {i}", f"{words.split()[-1]} {i}"])


def test_two_rows_two_seeds_launch_skip_resume_and_table(tmp_path):
    data = tmp_path / "short_text"
    data.mkdir()
    for name in ("tweet", "searchsnippets"):
        write_views(data, name)
    table = tmp_path / "small_table.yaml"
    table.write_text(
        "paper: SCCL (toy)\ntable: Table T\ncolumns: [ACC, NMI]\nrows:\n"
        "  - name: SCCL\n    source: run\n    method: sccl\n"
        "    metrics: [clustering.final.kmeans_acc, clustering.final.kmeans_nmi]\n"
        "    command: 'python run.py experiment=sccl_{dataset} seed=<seed>'\n"
        "    values: {tweet: [78.2, 89.2], searchsnippets: [85.2, 71.1]}\n")
    out = tmp_path / "out"
    command = [sys.executable, "-m", "evaluation.across_runs.reproduce", str(table), "--seeds", "0,1",
               "--out", str(out),
               f"data_dir={data}", *TINY]
    env = {**os.environ, "PROJECT_ROOT": str(ROOT)}
    first = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=800)
    assert first.returncode == 0, first.stderr[-3000:]
    folders = [out / f"sccl_{name}" / f"seed_{seed}" for name in ("tweet", "searchsnippets") for seed in (0, 1)]
    for folder in folders:
        results = json.loads((folder / "results.json").read_text())
        assert results["status"] == "finished" and results["steps"] == 2
    assert {json.loads((f / "results.json").read_text())["seed"] for f in folders} == {0, 1}
    written = (out / "paper_table.md").read_text()
    assert "| SCCL | tweet | ACC | 78.20 |" in written and "| SCCL | searchsnippets | NMI | 71.10 |" in written
    assert "(2) |" in written  # mean ± std over the two seeds
    assert written in first.stdout

    # one run interrupted (its checkpoint left, results.json not finished); the others finished
    interrupted = out / "sccl_tweet" / "seed_1"
    checkpoint = interrupted / "checkpoints" / "last.ckpt"
    (interrupted / "results.json").write_text(json.dumps({"status": "interrupted", "checkpoint": str(checkpoint),
                                                          "training_finished": False}))
    stamps = {f: (f / "results.json").stat().st_mtime_ns for f in folders if f != interrupted}
    dry = subprocess.run(command + ["--dry-run"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert "sccl_tweet (SCCL, tweet)\n  seeds: 1 finished, 1 to resume, 0 to start" in dry.stdout
    assert "sccl_searchsnippets (SCCL, searchsnippets)\n  seeds: 2 finished, 0 to resume, 0 to start" in dry.stdout
    second = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert second.returncode == 0, second.stderr[-3000:]
    launched = [line for line in second.stdout.splitlines() if line.startswith("$ python run.py")]
    assert len(launched) == 1 and "experiment=sccl_tweet" in launched[0] and " seed=1 " in launched[0]
    assert f"ckpt_path={checkpoint}" in launched[0]
    resumed = json.loads((interrupted / "results.json").read_text())
    assert resumed["status"] == "finished" and resumed["resumed_from"] == str(checkpoint)
    assert all((f / "results.json").stat().st_mtime_ns == stamp for f, stamp in stamps.items())


def test_a_missing_file_stops_before_any_run(tmp_path, capsys):
    folder = tmp_path / "short_text"
    with pytest.raises(SystemExit) as exit_info:
        reproduce.main(["sccl_table1", "--rows", "sccl_tweet", "--out", str(tmp_path / "out"), f"data_dir={folder}"])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert err.strip() == (f"error: {folder / 'tweet_trans_subst_20.csv'} is missing; get it with "
                           f"`python tools.py download tweet_views --dest {tmp_path}`")
    assert not (tmp_path / "out" / "sccl_tweet").exists()


def test_run_states_and_the_commands_they_give(tmp_path):
    fresh, done, stopped, evaluated = (tmp_path / name for name in ("fresh", "done", "stopped", "evaluated"))
    for folder in (done, stopped, evaluated):
        (folder / "checkpoints").mkdir(parents=True)
        (folder / "checkpoints" / "last.ckpt").write_bytes(b"x")
    (done / "results.json").write_text(json.dumps({"method": "sccl", "dataset": "tweet", "status": "finished"}))
    (stopped / "results.json").write_text(json.dumps({"method": "sccl", "status": "interrupted"}))
    (evaluated / "results.json").write_text(json.dumps({"method": "sccl", "status": "evaluation_failed",
                                                        "training_finished": True}))
    assert reproduce.run_state(fresh) == ("fresh", None, False)
    assert reproduce.run_state(done) == ("done", None, False)
    assert reproduce.run_state(stopped) == ("resume", stopped / "checkpoints" / "last.ckpt", False)
    assert reproduce.run_state(evaluated) == ("resume", evaluated / "checkpoints" / "last.ckpt", True)

    run = reproduce.Run("sccl_tweet", ["SCCL, tweet"], cfg=None, fresh=[0, 2],
                        resume={1: (Path("/c/last.ckpt"), True)})
    local = reproduce.launch_commands(run, tmp_path, "local", ["trainer.devices=4"])
    assert [c[2:] for c in local] == [
        ["--multirun", "experiment=sccl_tweet", f"hydra.sweep.dir={tmp_path / 'sccl_tweet'}",
         "hydra.sweep.subdir=seed_${seed}", "seed=0,2", "trainer.devices=4"],
        ["--multirun", "experiment=sccl_tweet", f"hydra.sweep.dir={tmp_path / 'sccl_tweet'}",
         "hydra.sweep.subdir=seed_${seed}", "seed=1", "ckpt_path=/c/last.ckpt", "eval_only=true", "trainer.devices=4"]]
    slurm = reproduce.launch_commands(run, tmp_path, "slurm", [])
    assert all("hydra/launcher=slurm" in command for command in slurm)
