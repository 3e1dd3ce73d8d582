"""MTEB through our encoder (evaluation/benchmarks/mteb_eval.py): local tasks, the CLI, the run callback, the
offline stop."""
from __future__ import annotations

import json

import numpy as np
import pytest
from scipy.stats import spearmanr

from ctclust.commands.evaluate import main as evaluate_main
from evaluation.benchmarks.mteb_eval import MtebUnavailableError, check_data_available, evaluate_mteb, resolve_tasks
from textcore.errors import ConfigError

pytest.importorskip("mteb")

STS_ROWS = [
    ("a cat sits on the mat", "a cat is sitting on a mat", 5.0),
    ("a dog runs in the park", "stocks fell on monday", 0.0),
    ("the bank raised rates", "interest rates went up", 3.5),
    ("birds fly south", "planes fly over the sea", 2.0),
    ("he plays the guitar", "a man plays an instrument", 3.0),
    ("the soup is cold", "the weather is cold", 1.0),
]
TOPICS = {"animals": ["cats purr", "dogs bark", "cows moo", "owls hoot", "horses neigh", "lions roar"],
          "money": ["stocks fell", "banks lend", "bonds rose", "prices climb", "markets rally", "rates drop"],
          "sport": ["teams score", "players run", "fans cheer", "coaches shout", "refs whistle", "goals count"]}


def write_sts(path):
    path.write_text("sentence1,sentence2,score\n" + "".join(f"{a},{b},{s}\n" for a, b, s in STS_ROWS))
    return path


def write_clustering(path):
    path.write_text("text,label\n" + "".join(f"{t},{topic}\n" for topic, texts in TOPICS.items() for t in texts))
    return path


def random_encode(texts):
    """Embeddings that depend only on the text (a fixed hash-seeded vector per text)."""
    return np.stack([np.random.default_rng(sum(map(ord, t)) * 7919 + len(t)).normal(size=16) for t in texts])


def test_local_sts_task_scores_the_cosine_spearman_of_our_embeddings(tmp_path):
    result = evaluate_mteb(random_encode, [str(write_sts(tmp_path / "pairs.csv"))], tmp_path / "out", "toy")
    task = result["tasks"]["LocalSTS.pairs"]
    a = random_encode([r[0] for r in STS_ROWS])
    b = random_encode([r[1] for r in STS_ROWS])
    cosine = (a * b).sum(1) / np.linalg.norm(a, axis=1) / np.linalg.norm(b, axis=1)
    expected = spearmanr(cosine, [r[2] for r in STS_ROWS]).statistic
    assert task["main_score_name"] == "cosine_spearman" and task["type"] == "STS"
    assert task["main_score"] == pytest.approx(expected, abs=1e-6)
    assert result["protocol"].startswith("MTEB (mteb ")
    # MTEB's own result file, in MTEB's layout
    files = list((tmp_path / "out" / "results").rglob("LocalSTS.pairs.json"))
    assert len(files) == 1 and "scores" in json.loads(files[0].read_text())


def test_local_clustering_task_gives_v_measure_one_for_embeddings_that_separate_the_labels(tmp_path):
    topic_of = {t: i for i, texts in enumerate(TOPICS.values()) for t in texts}

    def by_topic(texts):
        return np.eye(3)[[topic_of[t] for t in texts]] + 1e-3 * random_encode(texts)[:, :3]

    path = write_clustering(tmp_path / "topics.csv")
    perfect = evaluate_mteb(by_topic, [str(path)], tmp_path / "a", "perfect")["tasks"]["LocalClustering.topics"]
    noise = evaluate_mteb(random_encode, [str(path)], tmp_path / "b", "noise")["tasks"]["LocalClustering.topics"]
    assert perfect["main_score_name"] == "v_measure"
    assert perfect["main_score"] == pytest.approx(1.0)
    assert noise["main_score"] < 0.9


def test_unknown_task_and_bad_local_table_name_the_fix(tmp_path):
    with pytest.raises(ConfigError, match=r"STS12x.*did you mean.*STS12"):
        resolve_tasks(["STS12x"])
    bad = tmp_path / "bad.csv"
    bad.write_text("sentence,score\nhello,1\n")
    with pytest.raises(ConfigError, match=r"bad.csv.*sentence1.*sentence2"):
        resolve_tasks([str(bad)])
    with pytest.raises(ConfigError, match="missing.csv"):
        resolve_tasks([str(tmp_path / "missing.csv")])


def test_hub_task_without_network_or_cache_stops_with_one_message(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "empty_cache"))
    with pytest.raises(MtebUnavailableError, match=r"STS12 \(Hub dataset mteb/sts12-sts.*HF_HUB_OFFLINE=1"):
        check_data_available(resolve_tasks(["STS12"]))


def test_cli_runs_mteb_and_writes_our_table_and_mteb_files(tmp_path, capsys):
    sts = write_sts(tmp_path / "pairs.csv")
    result = evaluate_main(["--model", "tiny", "--tasks", "mteb", "--mteb-tasks", str(sts),
                            "--output", str(tmp_path / "eval"), "--name", "tiny"])
    assert 0 <= abs(result["mteb"]["tasks"]["LocalSTS.pairs"]["main_score"]) <= 1
    assert result["mteb"]["max_length"] > 0
    table = (tmp_path / "eval" / "tiny.md").read_text()
    assert "## MTEB (mteb " in table and "| LocalSTS.pairs | STS | cosine_spearman |" in table
    assert list((tmp_path / "eval" / "mteb" / "results").rglob("LocalSTS.pairs.json"))


def test_cli_offline_hub_task_exits_before_loading_the_model(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "empty_cache"))
    with pytest.raises(SystemExit) as exit_info:
        evaluate_main(["--model", "no-such-org/no-such-model", "--tasks", "mteb", "--mteb-tasks", "STS12",
                       "--output", str(tmp_path)])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert "MTEB cannot load STS12" in err and "no-such-model" not in err and "Traceback" not in err


def test_run_callback_is_off_until_tasks_are_named_and_writes_its_own_section(tmp_path):
    from callbacks.evaluation.final_eval import FinalEvaluation
    from tests.helpers import compose_config

    cfg = compose_config([])
    entry = cfg.callbacks.mteb
    assert entry.tasks == ["mteb"] and entry.mteb_tasks == [] and entry.results_key == "mteb_evaluation"
    off = FinalEvaluation(tasks=["mteb"], mteb_tasks=[], results_key="mteb_evaluation")
    assert off.tasks == [] and off.results_key == "mteb_evaluation"
    on = FinalEvaluation(tasks=["mteb"], mteb_tasks=[str(write_sts(tmp_path / "p.csv"))], results_key="x")
    assert on.tasks == ["mteb"]
    with pytest.raises(ConfigError, match="STS12x"):
        FinalEvaluation(tasks=["mteb"], mteb_tasks=["STS12x"])
