"""Model cards of exported runs (evaluation/model_io/model_card.py) and the Hub upload's checks
(evaluation/model_io/export.py)."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from ctclust.commands.export import main as export_main
from ctclust.training.train import train
from evaluation.model_io.model_card import build_card
from tests.helpers import compose_config, toy_overrides


def hand_made_run(folder: Path) -> Path:
    (folder / ".hydra").mkdir(parents=True)
    config = {"method": {"_target_": "lightning_modules.clusterns.ClusterNS", "name": "clusterns", "num_clusters": 16,
                         "temperature": 0.05, "momentum": 0.001, "callbacks": {"x": 1}},
              "dataset": {"name": "wiki", "path": "wiki1m_for_simcse.txt"}, "backbone": {"name": "minilm"},
              "batch_size": 64, "seed": 3}
    (folder / "config_resolved.yaml").write_text(yaml.safe_dump(config))
    (folder / ".hydra" / "overrides.yaml").write_text(yaml.safe_dump(["method=clusterns", "dataset=wiki",
                                                                       "hydra.run.dir=/somewhere"]))
    results = {"steps": 200, "sts": {"aggregation": "all", "avg": 0.7123,
                                     "spearman": {"STS12": 0.61, "STSB": 0.8012, "SICKR": 0.725}},
               "final_evaluation": {"transfer": {"protocol_name": "SentEval PyTorch logistic regression",
                                                 "tasks": {"MR": {"acc": 75.5}, "CR": {"acc": 80.25}}, "avg": 77.875}},
               "mteb_evaluation": {"headline": {"MTEB STS12 (cosine_spearman)": 61.234}}}
    (folder / "results.json").write_text(json.dumps(results))
    return folder


def test_card_holds_method_recipe_data_results_command_and_citation(tmp_path):
    card = build_card(hand_made_run(tmp_path / "run"), "me/clusterns-minilm")
    assert card.startswith("---\nlibrary_name: sentence-transformers") and "# me/clusterns-minilm" in card
    assert "Clustering-Aware Negative Sampling for Unsupervised Sentence Representation" in card
    assert "| `num_clusters` | `16` |" in card and "| `momentum` | `0.001` |" in card and "`callbacks`" not in card
    assert "| `steps` | `200` |" in card and "| `seed` | `3` |" in card
    assert "`wiki` (wiki1m_for_simcse.txt)" in card
    assert "`python run.py method=clusterns dataset=wiki`" in card  # the run folder override is not part of it
    assert "### MTEB (MTEB's protocol" in card and "| STS12 (cosine_spearman) | 61.23 |" in card
    assert "`all` aggregation" in card and "| 61.00 | 80.12 | 72.50 | 71.23 |" in card
    assert "Protocol: SentEval PyTorch logistic regression" in card and "| 75.50 | 80.25 | 77.88 |" in card
    assert "@inproceedings{deng-etal-2023-clustering" in card


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
    folder = tmp_path_factory.mktemp("export_run")
    rows = ["label,text0,text1"] + [f"{i % 2},word{i} topic{i % 2} thing,topic{i % 2} word{i}" for i in range(16)]
    csv = folder / "toy.csv"
    csv.write_text("\n".join(rows) + "\n")
    train(compose_config(toy_overrides(csv, steps=2), folder / "run"))
    return folder / "run"


def test_dry_run_writes_the_folders_and_the_card(tiny_run, tmp_path):
    info = export_main(["--run", str(tiny_run), "--output", str(tmp_path / "out"), "--push-to-hub", "me/sccl-tiny",
                        "--dry-run"])
    card = (tmp_path / "out" / "sentence-transformers" / "README.md").read_text()
    assert "# me/sccl-tiny" in card and "Supporting Clustering with Contrastive Learning" in card
    assert (tmp_path / "out" / "hf" / "README.md").read_text() == card and "hub_commit" not in info


@pytest.mark.parametrize("env,expected", [({"HF_HUB_OFFLINE": "1"}, "HF_HUB_OFFLINE is set"),
                                          ({"HF_TOKEN": ""}, "no Hugging Face credentials")])
def test_push_without_network_or_credentials_stops_before_uploading(tiny_run, tmp_path, monkeypatch, capsys, env,
                                                                    expected):
    monkeypatch.delenv("HF_TOKEN", raising=False)
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf_home"))  # no token file from this machine
    for key, value in env.items():
        monkeypatch.setenv(key, value) if value else monkeypatch.delenv(key, raising=False)
    with pytest.raises(SystemExit) as stop:
        export_main(["--run", str(tiny_run), "--output", str(tmp_path / "out"), "--push-to-hub", "me/sccl-tiny"])
    assert stop.value.code == 2
    err = [line for line in capsys.readouterr().err.splitlines() if line.startswith("error:")]  # not the bars
    assert len(err) == 1 and expected in err[0] and "nothing was uploaded" in err[0]
    assert "hf upload me/sccl-tiny" in err[0]
    assert (tmp_path / "out" / "sentence-transformers" / "README.md").is_file()  # the folder is kept
