"""The papers' tables as data and beside hand-made runs (evaluation/across_runs/paper_table.py)."""
from __future__ import annotations

import json

import pytest

from ctclust.commands.paper_table import main
from evaluation.across_runs.paper_table import available, compare, find_results, load_table
from textcore.errors import ConfigError


def run(folder, method, dataset, acc, nmi, seed, head=None):
    folder.mkdir(parents=True)
    final = {"kmeans_acc": acc, "kmeans_nmi": nmi}
    if head:
        final.update(head_acc=head[0], head_nmi=head[1])
    (folder / "results.json").write_text(json.dumps({"method": method, "dataset": dataset, "seed": seed,
                                                     "backbone": "minilm", "steps": 50,
                                                     "clustering": {"final": final}}))


def test_every_table_loads_and_holds_the_papers_numbers():
    assert {"sccl_table1", "aecl_table2"} <= set(available())
    sccl = load_table("sccl_table1")
    row = next(r for r in sccl["rows"] if r["name"] == "SCCL")
    assert row["values"]["searchsnippets"] == [85.2, 71.1] and row["values"]["tweet"] == [78.2, 89.2]
    aecl = load_table("aecl_table2")
    row = next(r for r in aecl["rows"] if r["name"] == "AECL")
    assert row["values"]["stackoverflow"] == [83.22, 73.12] and row["metrics"][0] == "clustering.final.head_acc"
    for name in ("sccl_table1", "aecl_table2", "pairsupcon_table1"):  # eight short-text sets each
        assert all(len(r["values"]) == 8 for r in load_table(name)["rows"])
    clusterns = {r["name"]: r for r in load_table("clusterns_table1")["rows"]}
    assert clusterns["prompt ClusterNS RoBERTa-base"]["values"] == {"wiki": [79.74]}
    assert clusterns["SimCSE BERT-base"]["values"] == {"wiki": [76.25]}
    for name in available():
        load_table(name)
    with pytest.raises(ConfigError, match="available"):
        load_table("nope")


def test_runs_are_matched_by_method_and_dataset_and_averaged_over_seeds(tmp_path):
    run(tmp_path / "a" / "0", "sccl", "searchsnippets", 0.80, 0.70, 0)
    run(tmp_path / "a" / "1", "sccl", "searchsnippets", 0.84, 0.72, 1)
    run(tmp_path / "b", "aecl", "searchsnippets", 0.50, 0.40, 0, head=(0.60, 0.50))
    (tmp_path / "eval.json").write_text(json.dumps({"model": "tfidf", "clustering": {
        "seeds": [0, 1], "datasets": {"tweet": {"acc": 0.5, "nmi": 0.75}}}}))
    runs, evaluations = find_results(tmp_path)
    assert len(runs) == 3 and len(evaluations) == 1
    result = compare(load_table("aecl_table2"), runs, evaluations)
    cells = {(r["row"], r["dataset"], r["metric"]): r for r in result["rows"]}
    sccl = cells[("SCCL", "searchsnippets", "ACC")]
    assert sccl["mean"] == pytest.approx(82.0) and sccl["std"] == pytest.approx(2.0) and sccl["n"] == 2
    assert sccl["difference"] == pytest.approx(82.0 - 79.90)
    assert cells[("AECL", "searchsnippets", "NMI")]["mean"] == pytest.approx(50.0)  # the head, as AECL reports
    assert cells[("TF-IDF", "tweet", "ACC")]["difference"] == pytest.approx(50.0 - 54.34)
    missing = {(m["row"], m["dataset"]): m["command"] for m in result["missing"]}
    assert missing[("AECL", "tweet")] == "python run.py experiment=aecl_tweet seed=<seed>"
    assert ("SCCL", "searchsnippets") not in missing and len(missing) == 4 * 8 - 3


def test_cli_prints_and_writes_the_table(tmp_path, capsys):
    run(tmp_path / "runs" / "0", "sccl", "tweet", 0.5, 0.8, 0)
    text = main(["sccl_table1", "--runs", str(tmp_path / "runs"), "--output", str(tmp_path / "t.md")])
    assert "| SCCL | tweet | ACC | 78.20 | 50.00 ± 0.00 (1) | -28.20 | minilm, 50 steps |" in text
    assert (tmp_path / "t.md").read_text() == text
    with pytest.raises(SystemExit):
        main(["sccl_table1", "--runs", str(tmp_path / "nowhere")])


def test_sts_rows_match_the_backbone_too(tmp_path):
    for i, (method, backbone, avg) in enumerate([("clusterns_prompt", "roberta-base", 0.79),
                                                 ("clusterns_prompt", "bert-base-uncased", 0.78),
                                                 ("clusterns_prompt", "minilm", 0.70)]):
        folder = tmp_path / str(i)
        folder.mkdir()
        (folder / "results.json").write_text(json.dumps({"method": method, "dataset": "wiki", "backbone": backbone,
                                                         "steps": 9, "sts": {"avg": avg}}))
    runs, evaluations = find_results(tmp_path)
    result = compare(load_table("clusterns_table1"), runs, evaluations)
    cells = {r["row"]: r for r in result["rows"]}
    assert set(cells) == {"prompt ClusterNS RoBERTa-base", "prompt ClusterNS BERT-base"}  # minilm matches no row
    assert cells["prompt ClusterNS RoBERTa-base"]["mean"] == pytest.approx(79.0)
    assert cells["prompt ClusterNS RoBERTa-base"]["difference"] == pytest.approx(79.0 - 79.74)
    missing = {m["row"]: m["command"] for m in result["missing"]}
    assert missing["PromptBERT BERT-base"].startswith("python run.py experiment=promptbert_bert_base ")


def test_pairsupcon_rows_read_the_runs_end_of_training_evaluation(tmp_path):
    folder = tmp_path / "run"
    folder.mkdir()
    (folder / "results.json").write_text(json.dumps({"method": "pairsupcon", "dataset": "nli", "steps": 30,
                                                     "backbone": "bert-base-uncased"}))
    (folder / "evaluation.json").write_text(json.dumps({"clustering": {"datasets": {
        "tweet": {"acc": 0.55, "nmi": 0.8}, "agnews": {"acc": 0.81, "nmi": 0.5}}}}))
    (tmp_path / "bert.json").write_text(json.dumps({"model": "bert-base-uncased", "clustering": {
        "seeds": list(range(10)), "datasets": {"tweet": {"acc": 0.45, "nmi": 0.7}}}}))
    runs, evaluations = find_results(tmp_path)
    result = compare(load_table("pairsupcon_table1"), runs, evaluations)
    cells = {(r["row"], r["dataset"]): r for r in result["rows"]}
    assert set(cells) == {("PairSupCon base", "tweet"), ("PairSupCon base", "agnews"), ("BERT base", "tweet")}
    assert cells[("PairSupCon base", "tweet")]["difference"] == pytest.approx(55.0 - 55.7)
    assert cells[("PairSupCon base", "agnews")]["mean"] == pytest.approx(81.0)
    assert cells[("BERT base", "tweet")]["difference"] == pytest.approx(45.0 - 45.1)
    missing = {(m["row"], m["dataset"]): m["command"] for m in result["missing"]}
    assert "--clustering-max-length 64 --datasets stackoverflow" in missing[("BERT base", "stackoverflow")]
    assert ("PairSupCon large", "tweet") in missing  # another backbone: not this run
