"""Every supported pairing of a method with a dataset runs with its defaults; the others stop with a
message that lists the datasets the method trains on (a method class's trains_on against a
datamodule's data_kind)."""
from __future__ import annotations

import json
import warnings

import pytest
from omegaconf import OmegaConf

import validation
from tests.helpers import CONF, compose_config
from tests.helpers.data_files import FAST, write_nli, write_short_text_csv, write_stsb, write_wiki
from textcore.errors import UserError, find_user_error

METHODS = sorted(p.stem for p in (CONF / "method").glob("*.yaml"))
DATASETS = sorted(p.stem for p in (CONF / "dataset").glob("*.yaml"))
BENCHMARKS = ["agnews", "biomedical", "googlenews_s", "googlenews_t", "googlenews_ts", "searchsnippets",
              "stackoverflow", "tweet"]
SHORT_TEXT = ["csv", "demo", "hf", *BENCHMARKS]
NAMED = {"hf": ["dataset.name=some_user/some_texts"]}  # configs with a mandatory value
# the decision (docs/configuration.md "Which method trains on which dataset"), written out by hand
SUPPORTED = {
    "sccl": SHORT_TEXT,
    "aecl": SHORT_TEXT,
    "simcse": ["wiki", *SHORT_TEXT],
    "promptbert": ["wiki", *SHORT_TEXT],
    "clusterns": ["wiki", *SHORT_TEXT],
    "clusterns_prompt": ["wiki", *SHORT_TEXT],
    "pairsupcon": ["nli"],
}


@pytest.fixture(scope="module")
def resolved_groups(tmp_path_factory):
    """The resolved method and dataset subtrees of every config (composed once each)."""
    out = tmp_path_factory.mktemp("compose")
    methods = {m: OmegaConf.to_container(compose_config([f"method={m}"], out), resolve=True)["method"]
               for m in METHODS}
    datasets = {d: OmegaConf.to_container(compose_config([f"dataset={d}", *NAMED.get(d, [])], out),
                                          resolve=True)["dataset"] for d in DATASETS}
    return methods, datasets


def test_the_decision_covers_every_config():
    assert sorted(SUPPORTED) == METHODS
    assert set(DATASETS) == {"wiki", "nli", *SHORT_TEXT}


@pytest.mark.parametrize("method", METHODS)
def test_pairing_check_accepts_exactly_the_supported_datasets(method, resolved_groups):
    methods, datasets = resolved_groups
    assert sorted(validation.datasets_for(methods[method]["_target_"])) == sorted(SUPPORTED[method])
    for dataset in DATASETS:
        cfg = OmegaConf.create({"method": methods[method], "dataset": datasets[dataset]})
        if dataset in SUPPORTED[method]:
            validation.check_pairing(cfg)
            continue
        with pytest.raises(UserError) as caught:
            validation.check_pairing(cfg)
        message = str(caught.value)
        assert f"method={method} does not train on dataset={datasets[dataset]['name']}" in message
        listed = message.split(f"Datasets for method={method}: ")[1].split(" (e.g.")[0].split(", ")
        assert sorted(listed) == sorted(SUPPORTED[method]), message


@pytest.mark.parametrize("method,dataset", [("pairsupcon", "demo"), ("sccl", "wiki"), ("aecl", "nli"),
                                            ("simcse", "nli")])
def test_unsupported_pairing_stops_before_any_work(method, dataset, tmp_path):
    from ctclust.training.train import train

    with pytest.raises(Exception) as caught:
        train(compose_config([f"method={method}", f"dataset={dataset}", *FAST], tmp_path / "run"))
    error = find_user_error(caught.value)
    assert error is not None and f"method={method} does not train on dataset={dataset}" in str(error)
    assert f"python run.py method={method} dataset=" in str(error)
    assert not (tmp_path / "run" / "config_resolved.yaml").exists()  # stopped before writing anything


def test_wiki_and_nli_find_their_shared_folder_without_data_dir(tmp_path):
    wiki = compose_config(["method=clusterns", "dataset=wiki"], tmp_path)
    nli = compose_config(["method=pairsupcon", "dataset=nli"], tmp_path)
    assert wiki.dataset.path.endswith("/shared/data/wiki/wiki_sample.txt")
    assert nli.dataset.data_dir.endswith("/shared/data/nli") and nli.dataset.file == "nli_sample.csv"
    moved = compose_config(["dataset=wiki", "data_dir=/elsewhere"], tmp_path)
    assert moved.dataset.path == "/elsewhere/wiki_sample.txt"  # the command line still wins
    assert compose_config(["dataset=demo"], tmp_path).data_dir.endswith("/shared/data/short_text")


def test_clusterns_default_k_fits_the_default_batch(tmp_path):
    cfg = compose_config(["method=clusterns", "dataset=wiki"], tmp_path)
    validation.validate(cfg)
    assert 2 <= cfg.method.num_clusters <= cfg.batch_size


STS_METHODS = ("simcse", "promptbert", "clusterns", "clusterns_prompt", "pairsupcon")


def _data_overrides(method: str, dataset: str, root) -> list[str]:
    """Where the tiny generated files are; nothing else about the run is changed."""
    sts = [f"sts_data_dir={write_stsb(root / 'sts')}"] if method in STS_METHODS else []
    if dataset == "csv":
        write_short_text_csv(root / "texts.csv", header=("label", "text", "aug"))
        return [f"data_dir={root}", "dataset.file=texts.csv", *sts]
    if dataset == "wiki":
        write_wiki(root / "wiki_sample.txt")
        return [f"data_dir={root}", *sts]
    if dataset == "nli":
        write_nli(root / "nli_sample.csv")
        return [f"data_dir={root}", *sts]
    return sts  # demo: the embedded corpus


# demo (the default dataset, 720 texts) for the clustering methods; a tiny csv for the others' short-text runs
ONE_STEP = [("sccl", "demo"), ("sccl", "csv"), ("aecl", "demo"), ("aecl", "csv"), ("simcse", "wiki"),
            ("clusterns", "wiki"), ("simcse", "csv"), ("clusterns", "csv"), ("pairsupcon", "nli"),
            ("promptbert", "wiki"), ("promptbert", "csv"), ("clusterns_prompt", "wiki"), ("clusterns_prompt", "csv")]


def test_one_step_runs_cover_every_method_and_kind_of_data():
    assert {m for m, _ in ONE_STEP} == set(METHODS)
    assert all(d in SUPPORTED[m] for m, d in ONE_STEP)
    kinds = {(m, "short_text" if d in SHORT_TEXT else d) for m, d in ONE_STEP}
    assert kinds == {(m, "short_text" if d in SHORT_TEXT else d) for m in METHODS for d in SUPPORTED[m]}


@pytest.mark.parametrize("method,dataset", ONE_STEP)
def test_supported_pairing_runs_one_step(method, dataset, tmp_path):
    from ctclust.training.train import train

    out = tmp_path / "run"
    cfg = compose_config([f"method={method}", f"dataset={dataset}", *FAST, *_data_overrides(method, dataset, tmp_path)],
                         out)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # STS tasks absent from the tiny SentEval folder are skipped with a warning
        results = train(cfg)
    assert results["steps"] == 1 and results["method"] == method
    saved = json.loads((out / "results.json").read_text())
    assert saved["steps"] == 1 and (out / "checkpoints" / "last.ckpt").is_file()


@pytest.mark.parametrize("dataset", BENCHMARKS)
@pytest.mark.parametrize("method", ["sccl", "aecl"])
def test_benchmark_configs_read_a_file_of_their_layout(method, dataset, tmp_path):
    """Each benchmark config (file name, columns, K) validates and reads a file laid out like the real one."""
    from ctclust.training.builders import instantiate_datamodule, resolve_speed_settings

    cfg = compose_config([f"method={method}", f"dataset={dataset}", f"data_dir={tmp_path}", "backbone=tiny"],
                         tmp_path / "run")
    k = cfg.dataset.num_clusters
    write_short_text_csv(tmp_path / cfg.dataset.file, n_per_topic=2, topics=k)
    validation.validate(cfg)
    resolve_speed_settings(cfg)  # as the run does before building anything
    datamodule = instantiate_datamodule(cfg)
    datamodule.setup("fit")
    validation.check_data(cfg, datamodule)
    assert datamodule.num_clusters == k and len(datamodule.texts) == 2 * k


@pytest.mark.slow
@pytest.mark.parametrize("dataset", BENCHMARKS)
@pytest.mark.parametrize("method", ["sccl", "aecl", "simcse", "clusterns"])
def test_benchmark_pairing_runs_one_step(method, dataset, tmp_path):
    from ctclust.training.train import train

    k = compose_config([f"dataset={dataset}"], tmp_path).dataset.num_clusters
    write_short_text_csv(tmp_path / f"{dataset}.csv", n_per_topic=2, topics=k)
    extra = [f"sts_data_dir={write_stsb(tmp_path / 'sts')}"] if method in ("simcse", "clusterns") else []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        results = train(compose_config([f"method={method}", f"dataset={dataset}", f"data_dir={tmp_path}", *FAST,
                                        *extra], tmp_path / "run"))
    assert results["steps"] == 1
