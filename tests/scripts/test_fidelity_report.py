"""scripts/studies/fidelity_report.py: differences to the baseline of the same seed, from hand-made run folders."""
import json
from pathlib import Path

import pytest
import yaml

from tests.helpers import load_script

REPORT = load_script("studies/fidelity_report")


def make_run(folder: Path, config: dict, results: dict, metrics_rows: list[str] | None = None):
    folder.mkdir(parents=True)
    (folder / "config_resolved.yaml").write_text(yaml.safe_dump(config))
    (folder / "results.json").write_text(json.dumps(results))
    if metrics_rows:
        (folder / "csv").mkdir()
        (folder / "csv" / "metrics.csv").write_text("\n".join(metrics_rows) + "\n")


def sccl(objective, seed, acc):
    config = {"method": {"name": "sccl", "objective": objective}, "seed": seed}
    return config, {"method": "sccl", "dataset": "searchsnippets", "seed": seed,
                    "clustering": {"final": {"kmeans_acc": acc}}}


def test_paired_differences_and_sign_counts(tmp_path):
    group = tmp_path / "sccl_ablation"
    for i, (objective, seed, acc) in enumerate([("joint", 1, 0.70), ("joint", 2, 0.72), ("instance", 1, 0.68),
                                                ("instance", 2, 0.73), ("cluster", 2, 0.60)]):
        make_run(group / str(i), *sccl(objective, seed, acc))
    groups = {"sccl_ablation": [REPORT.load_run(p) for p in REPORT.find_runs([group])]}
    rows = {(r["comparison"], r["metric"]): r for r in REPORT.comparison_rows(groups)}
    instance = rows[("instance only - joint", "kmeans_acc")]
    assert instance["seeds"] == [1, 2]
    assert instance["diffs"] == pytest.approx([-0.02, 0.01])
    assert instance["mean"] == pytest.approx(-0.005)
    assert instance["std"] == pytest.approx(((0.015 ** 2 + 0.015 ** 2) / 1) ** 0.5)  # ddof=1
    assert instance["seeds_with_paper_sign"] == 1  # the paper says lower: only seed 1 is
    cluster = rows[("cluster only - joint", "kmeans_acc")]
    assert cluster["seeds"] == [2] and cluster["diffs"] == pytest.approx([-0.12]) and cluster["std"] is None
    assert ("instance only - joint", "head_acc") not in rows  # no run has the metric: no row


def test_headline_scores_in_percent_are_compared_as_fractions(tmp_path):
    group = tmp_path / "pairsupcon_modes"
    key = "clustering ACC avg (3 sets)"
    for i, (mode, acc) in enumerate([("both", 72.5), ("instance", 73.0)]):
        make_run(group / str(i), {"method": {"name": "pairsupcon", "mode": mode}, "seed": 1},
                 {"method": "pairsupcon", "dataset": "nli", "seed": 1,
                  "final_evaluation": {"headline": {key: acc}}})
    groups = {"pairsupcon_modes": [REPORT.load_run(p) for p in REPORT.find_runs([group])]}
    rows = {(r["comparison"], r["metric"]): r for r in REPORT.comparison_rows(groups)}
    assert rows[("instance only - both", "ACC avg (3 sets)")]["mean"] == pytest.approx(0.005)
    line = [x for x in REPORT.comparison_markdown(list(rows.values())) if "ACC avg" in x][0]
    assert "| 73.00 | 72.50 | +0.50 |" in line


def test_aecl_curve_reads_every_evaluation_step_and_the_stage_three_share(tmp_path):
    group = tmp_path / "aecl_forms"
    header = "step,train/stage,train/confident_share,val/head_acc,val/kmeans_acc"
    for i, (seed, head) in enumerate([(1, 0.5), (2, 0.7)]):
        make_run(group / str(i), {"method": {"name": "aecl", "reference": False}, "seed": seed},
                 {"method": "aecl", "dataset": "searchsnippets", "seed": seed},
                 [header, "4,1,0.0,,", "8,3,0.25,,", "9,3,0.75,,", f"10,,,{head},0.8"])
    lines = REPORT.aecl_curves([REPORT.load_run(p) for p in REPORT.find_runs([group])])
    assert "| paper form | 10 | 60.00 ± 14.14 | 80.00 ± 0.00 | 2 |" in lines
    assert lines[-1].endswith("per run: 50.0 %, 50.0 %")  # stage-1 rows are not counted


def test_a_missing_folder_is_one_line_and_exit_2(tmp_path, capsys):
    assert REPORT.main([str(tmp_path / "nope")]) == 2
    assert "no such folder" in capsys.readouterr().err


def test_each_aecl_run_lists_its_head_curve_and_how_its_final_head_fills_the_clusters(tmp_path):
    run_dir = tmp_path / "aecl_forms" / "0"
    make_run(run_dir, {"method": {"name": "aecl", "reference": True}, "seed": 3, "dataset": {"num_clusters": 4}},
             {"method": "aecl", "dataset": "searchsnippets", "seed": 3},
             ["step,val/head_acc", "0,0.25", "200,0.8", "400,0.5"])
    (run_dir / "predictions.csv").write_text("row,head_cluster\n0,1\n1,1\n2,1\n3,0\n4,2\n")
    [line] = REPORT.aecl_runs([REPORT.load_run(run_dir)])
    assert line == ("- reference=true, seed 3: head ACC 0: 25.0, 200: 80.0, 400: 50.0; "
                    "final head: 3 of 4 clusters used, the largest 3 of 5 texts")


def test_versus_subtracts_the_other_folders_run_of_the_same_setting_and_seed(tmp_path):
    def clusterns_run(folder, method, lr, seed, avg):
        make_run(folder, {"method": {"name": method, "lr": lr}, "seed": seed},
                 {"method": method, "dataset": "wiki", "seed": seed, "sts": {"avg": avg}})

    runs = [("simcse", 3e-5, 1, 0.760, 0.758), ("simcse", 3e-5, 2, 0.762, 0.765), ("clusterns", 5e-5, 1, 0.770, 0.762)]
    for i, (method, lr, seed, cpu, gpu) in enumerate(runs):
        clusterns_run(tmp_path / "cpu" / "clusterns_vs_simcse" / str(i), method, lr, seed, cpu)
        clusterns_run(tmp_path / "gpu" / "clusterns_vs_simcse" / str(i), method, lr, seed, gpu)
    lines = REPORT.device_differences(REPORT.read_groups(tmp_path / "cpu"), REPORT.read_groups(tmp_path / "gpu"))
    # differences +0.002, -0.003, +0.008: mean +0.0023, largest 0.008; each run counted once
    assert "| clusterns_vs_simcse | sts.avg | 3 | +0.23 | 0.80 |" in lines
