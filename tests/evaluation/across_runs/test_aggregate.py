"""evaluation.across_runs.aggregate on hand-made run folders: grouping, mean ± sample std, failures listed."""
import csv
import json
import statistics

import pytest
import yaml

from ctclust.commands.aggregate import main
from evaluation.across_runs.aggregate import aggregate, aggregate_folders, load_run, markdown
from evaluation.across_runs.sweep_trials import trials, write_trials
from textcore.run_folder import find_runs


def make_run(folder, method="sccl", dataset="searchsnippets", seed=0, acc=None, nmi=None, head_acc=None,
             config=None, results=True, failed=None, sts=None, selection=None):
    """A run folder as run.py leaves it: config_resolved.yaml (seed copied into seed-derived keys,
    as the interpolations do), .hydra/, and results.json (unless ``results`` is False)."""
    folder.mkdir(parents=True)
    cfg = {
        "seed": seed,
        "data_dir": f"/data/{seed}",  # a path: never splits a group
        "paths": {"output_dir": str(folder)},
        "backbone": {"name": "tiny"},
        "method": {"name": method, "temperature": 0.5, "lr": 5e-6, "callbacks": {"centroid_init": {"seed": seed}}},
        "dataset": {"name": dataset, "num_clusters": {"searchsnippets": 8, "stackoverflow": 20}.get(dataset),
                    "seed": seed, "callbacks": {"clustering_eval": {"kmeans_seed": seed, "output_dir": str(folder)}}},
        "trainer": {"max_steps": 4},
    }
    for key, value in (config or {}).items():  # "method.temperature": 0.2
        node = cfg
        *parents, last = key.split(".")
        for part in parents:
            node = node.setdefault(part, {})
        node[last] = value
    (folder / "config_resolved.yaml").write_text(yaml.safe_dump(cfg))
    (folder / ".hydra").mkdir()
    (folder / ".hydra" / "overrides.yaml").write_text(yaml.safe_dump([f"seed={seed}"]))
    if failed:
        (folder / "failed.json").write_text(json.dumps({"error": failed}))
    if results:
        final = {"step": 4}
        if acc is not None:
            final.update(kmeans_acc=acc, kmeans_nmi=nmi, kmeans_ari=acc / 2, kmeans_ami=nmi / 2)
        if head_acc is not None:
            final.update(head_acc=head_acc, head_nmi=nmi, head_ari=0.1, head_ami=0.1)
        out = {"method": method, "dataset": dataset, "seed": seed, "steps": 4}
        if acc is not None or head_acc is not None or sts is None:
            out["clustering"] = {"final": final}
        if sts is not None:
            out["sts"] = {"spearman": sts, "avg": statistics.fmean(sts.values()), "avg_over": list(sts)}
        if selection is not None:
            out["sts_selection"] = {"best": selection}
        out["objective"] = {"name": "clustering.final.kmeans_acc", "value": acc}
        (folder / "results.json").write_text(json.dumps(out))
    return folder


@pytest.fixture
def sweep(tmp_path):
    """SCCL on two datasets x 3 seeds; seed 2 on StackOverflow failed; one job never finished."""
    root = tmp_path / "multirun"
    root.mkdir()
    (root / "multirun.yaml").write_text("{}")
    job = 0
    values = {"searchsnippets": [(0.50, 0.40), (0.60, 0.44), (0.70, 0.48)],
              "stackoverflow": [(0.30, 0.20), (0.40, 0.30)]}
    for dataset, scores in values.items():
        for seed, (acc, nmi) in enumerate(scores):
            make_run(root / f"{job}_dataset={dataset},seed={seed}", dataset=dataset, seed=seed, acc=acc, nmi=nmi,
                     head_acc=acc + 0.01)
            job += 1
    make_run(root / f"{job}_dataset=stackoverflow,seed=2", dataset="stackoverflow", seed=2, results=False,
             failed="MissingFileError: stackoverflow.csv not found")
    make_run(root / f"{job + 1}_dataset=stackoverflow,seed=3", dataset="stackoverflow", seed=3, results=False)
    return root


def test_mean_and_sample_std_per_dataset_with_a_missing_seed_and_failures(sweep):
    agg, runs = aggregate_folders([sweep])
    assert len(runs) == 7 and agg["std"] == "sample (ddof=1)"
    assert agg["clustering"]["datasets"] == ["searchsnippets", "stackoverflow"]  # the papers' column order
    rows = {(r["label"], r["predictions"]): r for r in agg["clustering"]["rows"]}
    assert set(rows) == {("sccl", "KMeans"), ("sccl", "head")}  # seeds and paths do not split the group
    ss = rows["sccl", "KMeans"]["cells"]["searchsnippets"]["acc"]
    assert ss["n"] == 3 and ss["seeds"] == [0, 1, 2]
    assert ss["mean"] == pytest.approx(60.0) and ss["std"] == pytest.approx(10.0)  # population std would be 8.16
    so = rows["sccl", "KMeans"]["cells"]["stackoverflow"]["nmi"]
    assert so["n"] == 2 and so["mean"] == pytest.approx(25.0) and so["std"] == pytest.approx(7.0711, abs=1e-4)
    assert rows["sccl", "KMeans"]["avg"]["acc"] == pytest.approx((60.0 + 35.0) / 2)
    assert rows["sccl", "head"]["cells"]["searchsnippets"]["acc"]["mean"] == pytest.approx(61.0)
    failed = {f["seed"]: f["reason"] for f in agg["failed"]}
    assert set(failed) == {2, 3} and "MissingFileError" in failed[2] and "no results.json" in failed[3]


def test_markdown_marks_cells_with_fewer_seeds_and_lists_failed_runs(sweep):
    main(["--runs", str(sweep)])
    text = (sweep / "aggregate.md").read_text()
    assert "sample standard deviation (ddof=1)" in text and "n = 3 seeds per cell" in text
    line = next(row for row in text.splitlines() if row.startswith("| sccl | KMeans |") and "SS" not in row)
    cells = [c.strip() for c in line.strip("|").split("|")]
    assert cells[2:4] == ["60.00 ± 10.00", "44.00 ± 4.00"]  # SearchSnippets ACC, NMI
    assert cells[4] == "35.00 ± 7.07 (n=2)"  # StackOverflow ACC: seed 2 missing
    assert "## Runs without results in the tables (2)" in text and "stackoverflow.csv not found" in text
    with open(sweep / "aggregate.csv") as handle:
        table = list(csv.DictReader(handle))
    acc = [r for r in table if r["column"] == "stackoverflow" and r["metric"] == "acc" and r["predictions"] == "KMeans"]
    assert len(acc) == 1 and acc[0]["n"] == "2" and acc[0]["seeds"] == "0 1" and float(acc[0]["mean"]) == 35.0
    saved = json.loads((sweep / "aggregate.json").read_text())
    assert len(saved["failed"]) == 2 and saved["scale"] == "x100"


def test_rows_split_by_what_differs_except_seeds(tmp_path):
    for i, (temperature, seed) in enumerate([(0.2, 0), (0.2, 1), (0.5, 0), (0.5, 1)]):
        make_run(tmp_path / f"{i}", seed=seed, acc=0.5 + temperature / 10, nmi=0.4,
                 config={"method.temperature": temperature})
    make_run(tmp_path / "aecl", method="aecl", seed=0, head_acc=0.8, nmi=0.6, config={"method.lambda4": 0.18})
    agg = aggregate([load_run(p) for p in find_runs([tmp_path])])
    labels = sorted({r["label"] for r in agg["clustering"]["rows"]})
    assert labels == ["aecl", "sccl · method.temperature=0.2", "sccl · method.temperature=0.5"]
    row = next(r for r in agg["clustering"]["rows"] if r["label"].endswith("0.2") and r["predictions"] == "KMeans")
    assert row["cells"]["searchsnippets"]["acc"]["n"] == 2 and row["cells"]["searchsnippets"]["acc"]["mean"] == 52.0


def test_per_dataset_settings_stay_out_of_the_labels(tmp_path):
    # an experiment's per-dataset value (here AECL's lambda4) is part of the method's set-up, not a variant
    make_run(tmp_path / "a", method="aecl", dataset="searchsnippets", head_acc=0.8, nmi=0.6,
             config={"method.lambda4": 0.18})
    make_run(tmp_path / "b", method="aecl", dataset="stackoverflow", head_acc=0.7, nmi=0.6,
             config={"method.lambda4": 10.0})
    agg, _ = aggregate_folders([tmp_path])
    assert {r["label"] for r in agg["clustering"]["rows"]} == {"aecl"}


def test_sts_runs_get_the_seven_columns_and_their_average(tmp_path):
    tasks = ["STS12", "STS13", "STS14", "STS15", "STS16", "STSB", "SICKR"]
    for seed, base in enumerate([0.60, 0.70]):
        make_run(tmp_path / f"s{seed}", method="clusterns", dataset="wiki", seed=seed,
                 sts={t: base + i / 100 for i, t in enumerate(tasks)}, selection=base + 0.1)
    agg, _ = aggregate_folders([tmp_path])
    assert not agg["clustering"]["rows"]
    (row,) = agg["sts"]["rows"]
    assert row["label"] == "clusterns" and row["trained_on"] == "wiki"
    assert row["cells"]["STS12"]["mean"] == pytest.approx(65.0) and row["cells"]["SICKR"]["mean"] == pytest.approx(71.0)
    assert row["cells"]["avg"]["mean"] == pytest.approx(68.0) and row["cells"]["avg"]["n"] == 2
    assert row["cells"]["dev"]["mean"] == pytest.approx(75.0)
    from evaluation.across_runs.aggregate import markdown

    text = markdown(agg)
    assert "| method | trained on | STS12 |" in text and "| Avg. | STS-B dev |" in text


def test_pairsupcon_clustering_after_training_counts_as_clustering(tmp_path):
    for seed, acc in enumerate([0.6, 0.7]):
        run = make_run(tmp_path / f"p{seed}", method="pairsupcon", dataset="nli", seed=seed, sts={"STSB": 0.8})
        evaluation = {"clustering": {"seeds": list(range(10)), "datasets": {
            "agnews": {"acc": acc, "nmi": acc - 0.1, "ari": 0.3, "ami": 0.3},
            "tweet": {"acc": acc - 0.2, "nmi": 0.5, "ari": 0.3, "ami": 0.3}}}}
        (run / "evaluation.json").write_text(json.dumps(evaluation))
    agg, _ = aggregate_folders([tmp_path])
    (row,) = agg["clustering"]["rows"]
    assert row["predictions"] == "KMeans, mean of 10 seeds" and agg["clustering"]["datasets"] == ["agnews", "tweet"]
    assert row["cells"]["agnews"]["acc"]["mean"] == pytest.approx(65.0)
    assert row["avg"]["acc"] == pytest.approx((65.0 + 45.0) / 2)
    assert agg["sts"]["rows"][0]["cells"]["STSB"]["n"] == 2


def test_unlabelled_runs_are_listed_not_dropped(tmp_path):
    make_run(tmp_path / "u", dataset="my_texts.csv")  # clustering without labels: no ACC
    agg, _ = aggregate_folders([tmp_path])
    assert not agg["clustering"]["rows"] and len(agg["without_table_metrics"]) == 1


def test_run_folders_given_one_by_one_and_errors(tmp_path, capsys):
    a = make_run(tmp_path / "a", seed=0, acc=0.5, nmi=0.4)
    b = make_run(tmp_path / "b", seed=1, acc=0.7, nmi=0.4)
    main(["--runs", str(a), str(b), "--output", str(tmp_path / "tables")])
    assert "60.00 ± 14.14" in capsys.readouterr().out and (tmp_path / "tables" / "aggregate.md").exists()
    with pytest.raises(SystemExit) as exit_info:
        main(["--runs", str(tmp_path / "nowhere")])
    assert exit_info.value.code == 2 and "no such run" in capsys.readouterr().err


def test_trials_table_marks_the_best(sweep):
    runs = [load_run(p) for p in find_runs([sweep])]
    rows = trials(runs, ["method.temperature"])
    assert [r["job"] for r in rows] == list(range(7)) and rows[5]["status"] == "failed"
    write_trials(rows, ["method.temperature"], sweep)
    best = [line for line in (sweep / "trials.md").read_text().splitlines() if "**best**" in line]
    assert len(best) == 1 and best[0].startswith("| 2 |")  # job 2 has the highest objective (ACC 0.70)


def test_failed_trials_show_the_first_line_of_their_error_and_no_numbers(tmp_path):
    """A sweep whose trial 1 raised (a two-line message) and whose trial 2 stopped on a NaN loss, leaving a partial
    results.json (status nonfinite_loss) with the evaluations made before it: both are rows of the failures table
    with the error's first line, neither enters the clustering table, and the trials table marks them failed."""
    sweep = tmp_path / "sweep"
    make_run(sweep / "0", seed=0, acc=0.6, nmi=0.5)
    make_run(sweep / "1", seed=1, results=False, failed="RuntimeError: the projection broke\nsecond line of it")
    make_run(sweep / "2", seed=2, acc=0.99, nmi=0.99)  # its evaluation before the bad step
    partial = json.loads((sweep / "2" / "results.json").read_text())
    partial.update(status="nonfinite_loss", error="NonFiniteLossError: the training loss is not finite at step 3 "
                                                  "(train/loss=nan)\nmore")
    (sweep / "2" / "results.json").write_text(json.dumps(partial))
    agg, runs = aggregate_folders([sweep])
    reasons = {f["seed"]: f["reason"] for f in agg["failed"]}
    assert set(reasons) == {1, 2} and reasons[2].startswith("nonfinite_loss: NonFiniteLossError")
    cell = agg["clustering"]["rows"][0]["cells"]["searchsnippets"]
    assert cell["acc"]["n"] == 1 and cell["acc"]["mean"] == pytest.approx(60.0)  # x100; not the NaN run's 99
    table = markdown(agg)
    assert "| RuntimeError: the projection broke |" in table and "second line" not in table
    assert "| nonfinite_loss: NonFiniteLossError: the training loss is not finite at step 3 (train/loss=nan) |" \
        in table and "more" not in table.split("Runs without results")[1]
    rows = trials(runs, ["method.temperature"])
    assert [r["status"] for r in rows] == ["complete", "failed", "failed"]
    assert rows[1]["error"] == "RuntimeError: the projection broke"
    write_trials(rows, ["method.temperature"], sweep)
    md = (sweep / "trials.md").read_text()
    assert "| failed | RuntimeError: the projection broke |" in md and "**best**" in md.splitlines()[4]
    with open(sweep / "trials.csv") as handle:
        assert [r["error"] for r in csv.DictReader(handle)][1] == "RuntimeError: the projection broke"


def test_the_trials_table_says_what_happened_to_a_killed_trial(tmp_path):
    """With the study's records: a trial run again after its driver was killed is complete, with why and how it
    continued; a killed trial still waiting to run again is 'waiting', not failed."""
    sweep = tmp_path / "sweep"
    make_run(sweep / "0", seed=0, acc=0.6, nmi=0.5)
    make_run(sweep / "1", seed=1, acc=0.7, nmi=0.5)
    results = json.loads((sweep / "1" / "results.json").read_text())
    results["earlier_attempt"] = "killed: its process (pid 7 on host n1 is gone); continued from its last.ckpt (step 4)"
    (sweep / "1" / "results.json").write_text(json.dumps(results))
    make_run(sweep / "2", seed=2, results=False)  # killed, not run again yet: no results.json
    killed = "killed: its sweep driver (pid 7 on host n1 is gone)"
    study = [{"number": 0, "state": "complete", "run": str(sweep / "0"), "killed": []},
             {"number": 1, "state": "complete", "run": str(sweep / "1"), "killed": [killed]},
             {"number": 2, "state": "waiting", "run": str(sweep / "2"), "killed": [killed]}]
    rows = trials([load_run(p) for p in find_runs([sweep])], ["method.temperature"], study)
    assert [r["status"] for r in rows] == ["complete", "complete", "waiting"] and rows[2]["error"] == ""
    assert rows[1]["note"] == f"{killed}; {results['earlier_attempt']}" and rows[0]["note"] == ""
    assert rows[2]["note"] == f"{killed}; runs again when the sweep is started again"
    write_trials(rows, ["method.temperature"], sweep)
    assert f"| complete |  | {killed}; " in (sweep / "trials.md").read_text()


def test_an_interrupted_single_run_is_listed_with_its_signal(tmp_path):
    run = make_run(tmp_path / "run", acc=0.5, nmi=0.5)
    partial = json.loads((run / "results.json").read_text())
    partial.update(status="interrupted", signal="SIGTERM", interrupted_at_step=37)
    (run / "results.json").write_text(json.dumps(partial))
    agg, _ = aggregate_folders([run])
    assert agg["failed"][0]["reason"] == "interrupted: SIGTERM at step 37" and not agg["clustering"]["rows"]
