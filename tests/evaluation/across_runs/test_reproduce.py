"""python tools.py reproduce: the dry-run listing, and a two-row x two-seed table end to end on
the CPU."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ctclust.commands import reproduce as reproduce_command
from launching import reproduce

ROOT = Path(__file__).resolve().parents[3]
TINY = ["trainer=cpu", "backbone=tiny", "batch_size=8", "max_length=16", "trainer.max_steps=2",
        "dataset.num_clusters=3", "trainer.enable_progress_bar=false", "trainer.enable_model_summary=false",
        "~callbacks.progress", "dataset.callbacks.clustering_eval.every_n_steps=2",
        "dataset.callbacks.clustering_eval.kmeans_n_init=2", "method.callbacks.centroid_init.n_init=2",
        "print_table=false", "callbacks.report.plots=false"]


def test_dry_run_lists_the_eight_rows_three_seeds_and_their_files(tmp_path, capsys):
    text = reproduce_command.main(["sccl_table1", "--dry-run", "--output", str(tmp_path / "out")])
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


def test_table_runs_draw_no_report_figures_unless_asked(tmp_path):
    def command(*extra: str) -> str:
        text = reproduce_command.main(["sccl_table1", "--rows", "sccl_tweet", "--seeds", "0", "--dry-run",
                                       "--output", str(tmp_path), *extra])
        return next(line for line in text.splitlines() if line.startswith("  $ python run.py"))

    assert command().endswith("seed=0 callbacks.report.plots=false")
    assert "plots" not in command("--plots")
    # an override on the command line comes last, so it wins
    assert command("callbacks.report.plots=true").endswith("callbacks.report.plots=false callbacks.report.plots=true")


def test_sts_rows_list_the_senteval_folder_too(tmp_path):
    text = reproduce_command.main(["clusterns_table1", "--rows", "simcse_bert_base", "--seeds", "0", "--dry-run",
                           "--output", str(tmp_path)])
    assert "wiki/wiki1m_for_simcse.txt" in text and "senteval/downstream" in text
    assert "1 rows x 1 seeds = 1 runs" in text


def test_a_sample_is_refused(tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_info:
        reproduce_command.main(["sccl_table1", "--dry-run", "--output", str(tmp_path), "dataset.sample=true"])
    assert exit_info.value.code == 2
    assert "dataset.sample=true: a paper table compares runs on the papers' corpora" in capsys.readouterr().err


def test_gpu_hours_come_from_the_benchmarks_gpu_figures(tmp_path):
    from types import SimpleNamespace

    from launching.gpu_figures import gpu_figures
    from scripts.bench.gpu import record_figures

    def step(layout, steps_per_s, **more):  # a row as scripts/bench/gpu.py measures it
        return {"method": "sccl", "arch": "distilbert-base", "batch": 400, "precision": "fp32", "layout": layout,
                "chunk_tokens": 0, "grad_cache_tokens": 0, "steps_per_s": steps_per_s, "peak_gib": 1.0, **more}

    steps_table = [step("authors", 1.0), step("ours", 4.0)]
    end_to_end = [step("end-to-end", 2.5, raw_steps_per_s=4.0, peak_gib=None)]
    cpu = SimpleNamespace(device="cpu")
    cfg = reproduce.compose("sccl_tweet", [])
    record_figures(steps_table, cpu, tmp_path / "only_steps.json")
    only_steps = gpu_figures(tmp_path / "only_steps.json")
    assert [r["steps_per_s"] for r in only_steps] == [4.0]  # the authors' layout is not this project's run
    hours, why = reproduce.gpu_hours(cfg, only_steps)
    assert hours == pytest.approx(3000 / 4.0 / 3600) and why == "3000 steps at 4.00 steps/s"
    record_figures(steps_table + end_to_end, cpu, tmp_path / "both.json")
    both = gpu_figures(tmp_path / "both.json")
    assert reproduce.gpu_hours(cfg, both)[0] == pytest.approx(3000 / 2.5 / 3600)  # end to end preferred
    assert reproduce.gpu_hours(cfg, [])[0] is None
    assert gpu_figures(tmp_path / "absent.json") == []  # no GPU figures: nothing
    aecl = reproduce.compose("aecl_tweet", [])  # 70 epochs of ceil(2472 / 400) = 7 steps, no figure for AECL
    assert reproduce.training_steps(aecl) == 70 * 7
    assert reproduce.gpu_hours(aecl, both)[1].startswith("no GPU figure in BENCHMARKS.md for aecl")


def test_the_recorded_gpu_figures_are_the_rows_of_the_gpu_section():
    """BENCHMARKS.json's figures and BENCHMARKS.md's table for people say the same: each recorded row stands in
    the GPU section with its steps/s."""
    from launching.gpu_figures import BENCHMARKS, gpu_figures

    figures = gpu_figures()
    assert figures, "BENCHMARKS.json has no GPU figures (part 'gpu', written by scripts/bench/gpu.py)"
    section = (BENCHMARKS.parent / "BENCHMARKS.md").read_text().split("<!-- bench-gpu:start -->")[1]
    for row in figures:
        assert f"| {row['method']} | {row['arch']}, {row['batch']} | {row['precision']} |" in section
        assert f" {row['steps_per_s']:.2f} |" in section


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


@pytest.mark.slow
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
    command = [sys.executable, "-m", "ctclust.commands.reproduce", str(table), "--seeds", "0,1",
               "--output", str(out),
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
        reproduce_command.main(["sccl_table1", "--rows", "sccl_tweet", "--output", str(tmp_path / "out"),
                                f"data_dir={folder}"])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert err.strip() == (f"error: {folder / 'tweet_trans_subst_20.csv'} is missing; get it with "
                           f"`python tools.py download tweet_views --output {tmp_path}`")
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


# -- several runs on one device (--runs-per-gpu, launching.packing) -----------------------------------
def test_runs_that_do_not_fit_are_refused_before_any_starts(tmp_path, monkeypatch, capsys):
    from launching import packing

    card = packing.Device(0, "NVIDIA H100 80GB HBM3", 40.0)
    monkeypatch.setattr(packing, "devices", lambda use_gpu=True: [card])
    folder = tmp_path / "short_text"
    folder.mkdir()
    write_views(folder, "tweet")
    started = []
    monkeypatch.setattr(reproduce, "launch_packed", lambda *a, **k: started.append(a))
    with pytest.raises(SystemExit) as exit_info:
        reproduce_command.main(["sccl_table1", "--rows", "sccl_tweet", "--output", str(tmp_path / "out"),
                                f"data_dir={folder}", "--runs-per-gpu", "4", "--run-memory-gib", "15"])
    assert exit_info.value.code == 2 and not started
    err = capsys.readouterr().err
    assert ("--runs-per-gpu 4: 4 runs need about 4 x 15.0 GiB = 60.0 GiB (--run-memory-gib), but GPU 0 "
            "(NVIDIA H100 80GB HBM3) has 40.0 GiB free; use --runs-per-gpu 2") in err


def test_a_runs_memory_is_the_measured_peak_or_a_count_of_the_backbone(tmp_path):
    from launching import packing

    cfg = reproduce.compose("sccl_tweet", [])  # distilbert-base, batch 400, float32
    bench = [{"method": "sccl", "arch": "distilbert-base", "batch": 400, "precision": "fp32", "chunk": chunk,
              "cached": cached, "end_to_end": False, "steps_per_s": 5.0, "peak_gib": peak}
             for chunk, cached, peak in (("-", "-", 12.3), ("8192", "-", 6.9), ("8192", "2048", 2.0))]
    gib, source = packing.estimate_run_gib(cfg, bench, on_gpu=True)
    assert gib == pytest.approx(12.3 + packing.CUDA_CONTEXT_GIB)  # the larger of the layouts, cached left out
    assert "12.3 GiB measured for sccl, distilbert-base, batch 400, fp32" in source
    chunked = reproduce.compose("sccl_tweet", ["encoder_chunk_tokens=8192"])
    assert packing.estimate_run_gib(chunked, bench, on_gpu=True)[0] == pytest.approx(6.9 + packing.CUDA_CONTEXT_GIB)
    # no row for bf16: counted from the tiny backbone's configuration instead (a hand count of its parameters)
    tiny = reproduce.compose("sccl_tweet", ["backbone=tiny", "batch_size=8", "max_length=16",
                                            "++trainer.precision=bf16-mixed"])
    config = packing.backbone_config("tiny")
    h, layers, inner, vocab = config.hidden_size, config.num_hidden_layers, config.intermediate_size, config.vocab_size
    parameters = vocab * h + layers * (4 * h * h + 2 * h * inner)
    activations = layers * (8 * 3 * 16) * h * 34
    gib, source = packing.estimate_run_gib(tiny, bench, on_gpu=False)
    assert gib == pytest.approx((16 * parameters + activations) / 2**30 + packing.PROCESS_GIB)
    assert source.startswith("counted from the backbone's size")


def test_slots_fill_every_device_before_a_second_place():
    from launching import packing

    a, b = packing.Device(0, "A", 80.0), packing.Device(1, "B", 80.0)
    placed = [(s.device.index, s.place) for s in packing.slots([a, b], 2)]
    assert placed == [(0, 0), (1, 0), (0, 1), (1, 1)]
    assert packing.slots([a], 1)[0].environment() == {"CUDA_VISIBLE_DEVICES": "0"}
    assert packing.slots([packing.Device(None, "CPU", 8.0)], 1)[0].environment() == {}


def test_claimed_gpu_slots_never_put_more_than_n_processes_on_a_gpu(tmp_path):
    """Hydra's packed launcher: each job process claims one slot for its life; with GPUs x N processes every GPU
    gets N of them, and one process more finds none."""
    import multiprocessing

    context = multiprocessing.get_context("spawn")
    with context.Pool(4) as pool:
        claimed = pool.starmap(_claim_and_hold, [(str(tmp_path), 2, 2, 1.5)] * 4)
    assert sorted(claimed) == [0, 0, 1, 1]
    from launching import packing

    handles = [open(path, "w") for path in sorted(tmp_path.glob("*.lock"))]
    import fcntl

    for handle in handles:  # every slot was released when its process ended
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    assert packing.claim_gpu(tmp_path / "one", 1, 1) == 0
    held = packing._CLAIMED.pop(str(tmp_path / "one"))  # as if another process held the one slot
    with pytest.raises(RuntimeError, match="all 1 x 1 GPU slots"):
        packing.claim_gpu(tmp_path / "one", 1, 1)
    held[1].close()


def _claim_and_hold(folder: str, gpus: int, per_gpu: int, hold: float) -> int:
    import time

    from launching import packing

    gpu = packing.claim_gpu(Path(folder), gpus, per_gpu)
    assert packing.claim_gpu(Path(folder), gpus, per_gpu) == gpu  # the same process keeps its slot
    time.sleep(hold)  # all four hold theirs at once
    return gpu


@pytest.mark.slow
def test_two_runs_side_by_side_on_the_cpu_finish_and_write_the_table(tmp_path):
    """--runs-per-gpu 2 without a GPU: two run.py processes at once on the host, both finish, the table is written
    (about 45 s on 2 cores)."""
    data = tmp_path / "short_text"
    data.mkdir()
    write_views(data, "tweet")
    out = tmp_path / "out"
    command = [sys.executable, "-m", "ctclust.commands.reproduce", "sccl_table1", "--rows", "sccl_tweet",
               "--seeds", "0,1", "--output", str(out), "--runs-per-gpu", "2", "--precision", "fp32",
               f"data_dir={data}", *TINY]
    env = {**os.environ, "PROJECT_ROOT": str(ROOT)}
    done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    for seed in (0, 1):
        results = json.loads((out / "sccl_tweet" / f"seed_{seed}" / "results.json").read_text())
        assert results["status"] == "finished" and results["seed"] == seed and results["steps"] == 2
        assert (out / "launch" / f"sccl_tweet_seed_{seed}.log").is_file()
    record = json.loads((out / "packing.json").read_text())
    first, second = sorted(record["runs"], key=lambda r: r["started"])
    assert second["started"] < first["ended"]  # side by side: the second started before the first ended
    assert record["runs_finished"] == 2 and record["devices"] == ["the host"]
    lines = done.stdout.splitlines()
    launched = [i for i, line in enumerate(lines) if line.startswith("$ python run.py experiment=sccl_tweet")]
    ended = [i for i, line in enumerate(lines) if line.startswith("finished: sccl_tweet")]
    assert len(launched) == 2 and len(ended) == 2 and max(launched) < min(ended)
    assert "threads_per_job=1" in lines[launched[0]] and "++trainer.precision=32-true" in lines[launched[0]]
    listed = [line for line in lines if line.startswith("  $ python run.py experiment=sccl_tweet")]
    assert [line.strip() for line in listed] == [line.split("  > ")[0] for line in (lines[i] for i in launched)]
    table = (out / "paper_table.md").read_text()
    assert "| SCCL | tweet | ACC | 78.20 |" in table and "(2) |" in table
    assert "Trained in fp32 (`--precision fp32`" in table
