"""scripts/bench/gpu_session.py (the prepared GPU measurements in parts that fit a short allocation on a GPU node)
and the one device command, `bash scripts/bench/gpu_node.sh --session`, at smoke scale on the CPU."""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import load_script

SESSION = load_script("bench/gpu_session")
ROOT = Path(__file__).resolve().parents[2]


def _args(tmp_path, tiny=False, snapshot=True) -> argparse.Namespace:
    bundle = tmp_path / "bundle"
    if snapshot:
        (bundle / "official" / "sccl").mkdir(parents=True, exist_ok=True)
    return argparse.Namespace(data_dir=bundle / "data", bundle=bundle, tiny=tiny)


def test_the_parts_run_the_recipe_at_paper_scale(tmp_path, monkeypatch):
    args = _args(tmp_path)
    work = tmp_path / "work"
    [quality] = SESSION.commands("quality", args, work)
    assert quality[1] == "scripts/studies/sccl_side_by_side.py" and "--smoke" not in quality
    for option, value in (("--seeds", "0,1,2"), ("--precisions", "fp32"), ("--device", "cuda"),
                          ("--snapshot", str(args.bundle / "official" / "sccl")), ("--out", str(work / "quality"))):
        assert quality[quality.index(option) + 1] == value
    [precision] = SESSION.commands("precision", args, work)  # ours in TF32 and bf16 beside the same runs
    assert precision[precision.index("--precisions") + 1] == "fp32,tf32,bf16"
    assert precision[precision.index("--only") + 1] == "ours" and precision[precision.index("--out") + 1] == str(
        work / "quality")
    [profile] = SESSION.commands("profile", args, work)
    assert "--count-syncs" in profile and profile[profile.index("--methods") + 1] == "sccl,aecl"
    assert profile[profile.index("--precision") + 1] == "bf16"
    [steps] = SESSION.commands("steps", args, work)
    assert steps[steps.index("--grad-cache") + 1] == "0,2048,16384"
    assert steps[steps.index("--compile") + 1] == "default"
    assert steps[steps.index("--bucket") + 1] == "0,8" and steps[steps.index("--compile-bucket") + 1] == "8"
    from scripts.bench.gpu_steps import shared as gpu_shared  # the packing part names its backbone folder here

    monkeypatch.setattr(gpu_shared, "backbone_folder", lambda arch, tiny, root: root / arch)
    packing = SESSION.commands("packing", args, work)
    assert [c[c.index("--runs-per-gpu") + 1] for c in packing] == ["1", "2", "4"]
    assert [c[c.index("--seeds") + 1] for c in packing] == ["0", "0,1", "0,1,2,3"]
    assert all("--precision" in c and c[c.index("--precision") + 1] == "bf16" for c in packing)
    assert all(c[c.index("--output") + 1] == str(work / "packing" / f"n{n}") for c, n in zip(packing, (1, 2, 4)))
    assert f"trainer.max_steps={SESSION.PACKING_STEPS}" in packing[0]
    [corpus] = SESSION.commands("corpus", args, work)  # predict and KMeans on the GPU beside the CPU
    assert corpus[1] == "scripts/bench/corpus_devices.py" and corpus[corpus.index("--out") + 1] == str(work / "corpus")
    assert "--tiny" not in corpus
    no_snapshot = SESSION.commands("quality", _args(tmp_path / "other", snapshot=False), work)[0]
    assert "--snapshot" not in no_snapshot  # then only our side runs (the driver says so)


def test_parts_that_do_not_fit_the_budget_are_left_for_the_next_call(tmp_path, monkeypatch):
    ran, clock = [], [1000.0]
    monkeypatch.setattr(SESSION, "time", argparse.Namespace(time=lambda: clock[0]))
    expected = {"quality": 400, "precision": 100, "profile": 100, "steps": 100, "packing": 100, "corpus": 100}

    def fake_run(part, args, work, deadline):
        ran.append(part)
        clock[0] += expected[part]  # each part takes what it was expected to
        (work / part).mkdir(parents=True, exist_ok=True)
        (work / part / "done.json").write_text(json.dumps({"part": part, "ok": True, "exit": [0], "seconds": 1}))
        return {"part": part, "ok": True, "exit": [0], "seconds": 1}

    monkeypatch.setattr(SESSION, "run_part", fake_run)
    monkeypatch.setattr(SESSION, "EXPECTED", expected)
    work = tmp_path / "work"
    common = ["--bundle", str(tmp_path / "bundle"), "--work", str(work)]
    first = SESSION.main([*common, "--budget-s", "450"])
    assert ran == ["quality"]  # 400 s, then 50 s left: none of the others fits
    assert first["not_run"] == [f"{p} (expected about 100 s, 50 s left)" for p in
                                ("precision", "profile", "packing", "steps", "corpus")]
    second = SESSION.main([*common, "--budget-s", "500", "--collect", str(tmp_path / "out")])
    assert ran == ["quality", *SESSION.PARTS[1:]]  # the same command goes on where the last stopped
    assert second["parts"]["quality"]["earlier"] and not second["not_run"]
    text = (tmp_path / "out" / "session.md").read_text()
    assert "## quality: finished" in text and "## packing: finished" in text
    assert len(list((tmp_path / "out").iterdir())) <= 8  # the few small files worth copying back from the node


def _packed_run(folder: Path, steps: int, history: list[tuple[int, float]], seconds: dict) -> None:
    folder.mkdir(parents=True)
    (folder / "results.json").write_text(json.dumps({
        "status": "finished", "steps": steps, "seconds": seconds,
        "clustering": {"history": [{"step": s, "eval_seconds": e} for s, e in history]}}))


def test_packing_summary_derives_runs_per_hour_and_the_time_to_table_1(tmp_path):
    n2 = tmp_path / "packing" / "n2"
    n2.mkdir(parents=True)
    (n2 / "packing.json").write_text(json.dumps({"runs_per_hour": 120.0, "wall_seconds": 60.0}))
    for seed in (0, 1):  # 200 steps; evaluations at 0 (before training), 100 (during) and 200 (the end)
        _packed_run(n2 / "sccl_stackoverflow" / f"seed_{seed}", 200, [(0, 2.0), (100, 2.0), (200, 2.0)],
                    {"training": 22.0, "total": 30.0})
    text, numbers = SESSION.packing_summary(tmp_path)
    row = numbers[2]
    assert row["step_s"] == pytest.approx(0.1)  # (22 - 2) s / 200 steps
    assert row["evaluation_s"] == pytest.approx(2.0) and row["fixed_s"] == pytest.approx(8.0)
    assert row["evaluation_share"] == pytest.approx(12 / 60)
    per_run = 8.0 + 3000 * 0.1 + 31 * 2.0  # start-up and end, 3000 steps, 31 evaluations
    assert row["table1_hours"] == pytest.approx(12 * per_run / 3600)  # 24 runs, two at a time
    assert "| 2 | 2 | 60 | 120.0 | 10.00 | 2.0 | 20 % | 8 |" in text


def test_packing_summary_takes_a_step_at_its_median_and_counts_the_warm_up_as_fixed(tmp_path):
    # a short run on a GPU: 200 steps at 0.05 s, but 4 s of first steps (kernels chosen, workers starting) inside
    # "training"; the mean over the run (training less the evaluations during it) would make a step 0.07 s
    n1 = tmp_path / "packing" / "n1"
    n1.mkdir(parents=True)
    (n1 / "packing.json").write_text(json.dumps({"runs_per_hour": 100.0, "wall_seconds": 36.0}))
    _packed_run(n1 / "sccl_stackoverflow" / "seed_0", 200, [(0, 2.0), (100, 2.0), (200, 2.0)],
                {"start_up": 4.0, "training": 16.0, "end": 10.0, "total": 30.0, "step_median": 0.05})
    text, numbers = SESSION.packing_summary(tmp_path)
    row = numbers[1]
    assert row["step_s"] == pytest.approx(0.05)
    assert row["fixed_s"] == pytest.approx(30.0 - 200 * 0.05 - 6.0)  # start-up, warm-up and end: 14 s
    assert row["table1_hours"] == pytest.approx(24 * (14.0 + 3000 * 0.05 + 31 * 2.0) / 3600)
    assert "| 1 | 1 | 36 | 100.0 | 20.00 | 2.0 | 20 % | 14 |" in text


@pytest.mark.slow
def test_the_device_command_runs_every_part_at_smoke_scale_on_the_cpu(tmp_path, short_text_dir):
    """`bash scripts/bench/gpu_node.sh --tiny --session` on a tiny bundle (about 3 minutes on 2 cores): every part
    finishes, the files to take away are at most 8."""
    env = {**os.environ, "PROJECT_DATA_DIR": str(short_text_dir.parent), "BUNDLE": str(tmp_path / "bundle"),
           "OUT": str(tmp_path / "out"), "WORK": str(tmp_path / "work"), "PYTHON": sys.executable}
    bundle = [sys.executable, "scripts/bench/gpu_bundle.py", "--tiny", "--out", env["BUNDLE"]]
    snapshot = os.environ.get("SCCL_SNAPSHOT")
    subprocess.run(bundle + (["--sccl-snapshot", snapshot] if snapshot else []), cwd=ROOT, env=env, check=True,
                   capture_output=True)
    done = subprocess.run(["bash", "scripts/bench/gpu_node.sh", "--tiny", "--session"], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=1500)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    out = tmp_path / "out"
    text = (out / "session.md").read_text()
    for part in SESSION.PARTS:
        assert f"## {part}: finished" in text, text[-3000:]
    assert "| ours fp32 | 1 |" in text and "| ours bf16 | 1 |" in text and "| sccl | fp32 |" in text
    assert "Compiled step in steady state" in text
    assert "| 2 | 2 |" in text  # two runs side by side in the packing part
    assert "| cpu | 3,000 |" in text and "| fast | cpu | 4,000 | 8 |" in text  # the corpus part on the CPU
    assert len(list(out.iterdir())) <= 8 and (out / "results.tar.gz").is_file()


@pytest.mark.parametrize("flags,complaint", [
    (["--session"], "bundle.json is not there"),
    (["--tiny", "--session", "quality,steps"], "bundle.json is not there"),
    (["--no-such-flag"], "unknown argument --no-such-flag"),
])
def test_the_device_command_takes_session_and_its_parts(tmp_path, flags, complaint):
    """`--session [PARTS]` is an option of gpu_node.sh (it gets as far as looking for the bundle); a flag it does
    not know is refused with the ones it knows."""
    env = {**os.environ, "BUNDLE": str(tmp_path / "no_bundle")}
    done = subprocess.run(["bash", "scripts/bench/gpu_node.sh", *flags], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 2 and complaint in done.stderr, done.stderr


def test_a_part_runs_with_the_paths_under_the_checkout_relative_to_it(tmp_path, monkeypatch):
    # the tables a part writes quote its command, and they are pasted into committed files
    seen = []
    root = SESSION.ROOT
    monkeypatch.setattr(SESSION, "commands", lambda part, args, work: [
        ["/usr/bin/python3", "x.py", "--data", f"{root}/.gpu/data", f"data_dir={root}/.gpu/data", "--out", "/else"]])
    monkeypatch.setattr(SESSION.subprocess, "run",
                        lambda command, **kwargs: (seen.append((command, kwargs["cwd"])), argparse.Namespace(
                            returncode=0))[1])
    assert SESSION.run_part("steps", argparse.Namespace(), tmp_path, deadline=SESSION.time.time() + 60)["ok"]
    assert seen == [(["/usr/bin/python3", "x.py", "--data", ".gpu/data", "data_dir=.gpu/data", "--out", "/else"],
                     root)]
