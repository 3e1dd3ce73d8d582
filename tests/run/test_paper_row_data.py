"""Paper rows train on their corpora: a missing one stops the run with one line; a sample only when asked."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

from datamodules.download import catalogue
from tests.helpers import compose_config, write_wiki_and_stsb
from textcore.errors import ConfigError, MissingFileError

ROOT = Path(__file__).resolve().parents[2]
FAMILIES = ("sccl_", "aecl_", "simcse_", "clusterns_", "promptbert_", "pairsupcon_")
PAPER_ROWS = sorted(p.stem for p in (ROOT / "conf" / "experiment").glob("*.yaml")
                    if p.stem.startswith(FAMILIES) and not p.stem.endswith("_cpu"))
# the catalogue item each row's corpus is, by family
EXPECTED = {"sccl_": "{set}_views", "aecl_": "{set}", "simcse_": "wiki1m", "clusterns_": "wiki1m",
            "promptbert_": "wiki1m", "pairsupcon_": "nli_pairs"}


def expected_item(row: str) -> catalogue.Item:
    family = next(f for f in FAMILIES if row.startswith(f))
    return catalogue.BY_NAME[EXPECTED[family].format(set=row[len(family):])]


def test_the_paper_rows_are_all_found():
    assert len(PAPER_ROWS) == 31
    assert {"clusterns_prompt_bert_base", "promptbert_bert_base", "aecl_googlenews_ts"} <= set(PAPER_ROWS)


@pytest.mark.parametrize("row", PAPER_ROWS)
def test_every_paper_row_without_its_corpus_names_the_file_url_and_command(row, tmp_path, monkeypatch):
    import validation

    monkeypatch.setenv("PROJECT_DATA_DIR", str(tmp_path))
    cfg = compose_config([f"experiment={row}"])
    item = expected_item(row)
    with pytest.raises(MissingFileError) as err:
        validation.check_corpus(cfg)
    message = str(err.value)
    assert f"'{tmp_path / item.path}' is missing" in message
    assert catalogue.origins(item)[0] in message and catalogue.origins(item)[0].startswith("https://")
    assert f"Get it with `python tools.py download {item.name}`" in message
    assert message.endswith("or train on its sample with dataset.sample=true.") and "\n" not in message


@pytest.mark.parametrize("row", ["sccl_tweet", "aecl_googlenews_ts", "simcse_bert_base", "clusterns_prompt_bert_base",
                                 "pairsupcon_bert_base"])
@pytest.mark.slow
def test_run_py_stops_with_one_line_and_exit_2(row, tmp_path):
    env = {**os.environ, "PROJECT_DATA_DIR": str(tmp_path / "data")}
    done = subprocess.run([sys.executable, "run.py", f"experiment={row}", f"hydra.run.dir={tmp_path / 'run'}"],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 2
    item = expected_item(row)
    errors = [line for line in done.stderr.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1 and f"{item.path}' is missing" in errors[0]
    assert f"python tools.py download {item.name}" in errors[0]
    assert "Traceback" not in done.stderr
    assert not (tmp_path / "run" / "results.json").exists()


TINY = ["backbone=tiny", "trainer=cpu", "++trainer.precision=32-true", "batch_size=8", "trainer.max_steps=2",
        "trainer.max_epochs=-1", "trainer.enable_progress_bar=false", "trainer.enable_model_summary=false",
        "~callbacks.progress", "print_table=false", "callbacks.report.plots=false"]


def sample_run(row: str, extra: list[str], tmp_path: Path) -> dict:
    from ctclust.training.train import train

    out = tmp_path / "run"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the STS tasks a toy SentEval folder lacks
        train(compose_config([f"experiment={row}", "dataset.sample=true", *TINY, *extra], out))
    return json.loads((out / "results.json").read_text())


@pytest.mark.parametrize("row", ["sccl_tweet", "aecl_tweet"])
def test_short_text_rows_run_on_the_demo_corpus_when_asked(row, tmp_path, monkeypatch):
    monkeypatch.setenv("PROJECT_DATA_DIR", str(tmp_path / "nothing"))
    extra = ["dataset.callbacks.clustering_eval.every_n_steps=2", "dataset.callbacks.clustering_eval.kmeans_n_init=2"]
    extra += ["method.callbacks.centroid_init.n_init=2"] if row.startswith("sccl") else []
    results = sample_run(row, extra, tmp_path)
    corpus = "tweet_trans_subst_20.csv" if row.startswith("sccl") else "tweet.csv"
    assert results["steps"] == 2 and results["status"] == "finished"
    assert results["sample"] == {"file": str(ROOT / "datamodules" / "demo_data" / "demo.csv"),
                                 "instead_of": str(tmp_path / "nothing" / "short_text" / corpus)}


@pytest.mark.parametrize("row", ["simcse_bert_base", "clusterns_bert_base", "clusterns_prompt_bert_base",
                                 "promptbert_bert_base"])
def test_sentence_rows_run_on_the_wiki_sample_when_asked(row, tmp_path):
    wiki, sts = write_wiki_and_stsb(tmp_path)
    folder = tmp_path / "wiki"
    folder.mkdir()
    wiki.rename(folder / "wiki_sample.txt")
    extra = [f"data_dir={folder}", f"sts_data_dir={sts}", "method.callbacks.sts_selection.every_n_steps=1"]
    extra += ["method.num_clusters=2"] if row.startswith("clusterns") else []
    results = sample_run(row, extra, tmp_path)
    assert results["steps"] == 2
    assert results["sample"] == {"file": str(folder / "wiki_sample.txt"),
                                 "instead_of": str(folder / "wiki1m_for_simcse.txt")}


def test_pairsupcon_runs_on_the_nli_sample_when_asked(tmp_path):
    from tests.helpers.data_files import write_csv
    from tests.lightning_modules.pairsupcon.test_method import NLI_PAIRS, write_tiny_sts

    folder = tmp_path / "nli"
    folder.mkdir()
    write_csv(folder / "nli_sample.csv", ["sentence1", "sentence2", "gold_label"], [list(p) for p in NLI_PAIRS])
    sts = write_tiny_sts(tmp_path / "senteval")
    results = sample_run("pairsupcon_bert_base", [f"data_dir={folder}", f"sts_data_dir={sts}", "batch_size=4",
                                                  "method.callbacks.final_eval.tasks=[]"], tmp_path)
    assert results["steps"] == 2
    assert results["sample"] == {"file": str(folder / "nli_sample.csv"), "instead_of": str(folder / "nli_pairs.csv")}


def test_dataset_wiki_alone_reads_the_sample_and_says_so(tmp_path, monkeypatch):
    import validation

    monkeypatch.setenv("PROJECT_DATA_DIR", str(tmp_path))
    (tmp_path / "wiki").mkdir()
    (tmp_path / "wiki" / "wiki_sample.txt").write_text("a\nb\n")
    cfg = compose_config(["method=simcse", "dataset=wiki"])
    assert validation.check_corpus(cfg) == {"file": str(tmp_path / "wiki" / "wiki_sample.txt"), "instead_of": None}


def test_a_file_of_ones_own_is_not_checked_and_not_a_sample(toy_corpus):
    import validation

    cfg = compose_config(["dataset=csv", f"data_dir={toy_corpus.parent}", f"dataset.file={toy_corpus.name}"])
    assert validation.check_corpus(cfg) is None


def test_sample_on_a_dataset_without_one_is_one_message(toy_corpus):
    import validation

    cfg = compose_config(["dataset=csv", f"data_dir={toy_corpus.parent}", "dataset.sample=true",
                          "~dataset.sample_settings"])
    with pytest.raises(ConfigError, match=r"dataset.sample=true, but dataset=data.csv names no sample "
                                          r"\(dataset.sample_settings\)"):
        validation.check_corpus(cfg)


def test_paper_table_leaves_sample_runs_out(tmp_path):
    from evaluation.across_runs import paper_table

    for seed, sample in ((0, None), (1, {"file": "demo.csv", "instead_of": "tweet.csv"})):
        folder = tmp_path / f"seed_{seed}"
        folder.mkdir()
        results = {"method": "aecl", "dataset": "tweet", "seed": seed, "status": "finished",
                   "clustering": {"final": {"head_acc": 0.5 + seed / 10, "head_nmi": 0.5}}}
        if sample:
            results["sample"] = sample
        (folder / "results.json").write_text(json.dumps(results))
    runs, _ = paper_table.find_results(tmp_path)
    assert [run["seed"] for run in runs] == [0]
