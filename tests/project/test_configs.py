"""Every config composes; bad names fail with Hydra's list of options."""
from pathlib import Path

import pytest
from hydra.errors import MissingConfigException

from tests.helpers import CONF, compose_config

EXPERIMENTS = sorted(p.stem for p in (CONF / "experiment").glob("*.yaml"))
DATASETS = sorted(p.stem for p in (CONF / "dataset").glob("*.yaml"))
BENCHMARKS = [
    "agnews", "searchsnippets", "stackoverflow", "biomedical", "googlenews_ts", "googlenews_t", "googlenews_s", "tweet"
]


def test_all_benchmarks_and_backbones_have_configs():
    assert set(BENCHMARKS) | {"demo"} <= set(DATASETS)
    backbones = {p.stem for p in (CONF / "backbone").glob("*.yaml")}
    assert {"minilm", "distilbert_nli", "bert_base", "roberta_base", "tiny"} <= backbones
    assert {f"sccl_{name}" for name in BENCHMARKS} <= set(EXPERIMENTS)


@pytest.mark.parametrize("experiment", EXPERIMENTS)
def test_experiment_composes_and_resolves(experiment, tmp_path):
    from omegaconf import OmegaConf

    cfg = compose_config([f"experiment={experiment}"], tmp_path)
    resolved = OmegaConf.to_container(cfg, resolve=True)
    assert resolved["method"]["_target_"] and resolved["dataset"]["_target_"]


@pytest.mark.parametrize("dataset", DATASETS)
def test_dataset_composes(dataset, tmp_path):
    cfg = compose_config([f"dataset={dataset}"], tmp_path)
    assert cfg.dataset.num_clusters is None or cfg.dataset.num_clusters >= 1
    assert cfg.method.num_clusters == cfg.dataset.num_clusters


def test_sccl_paper_settings_in_experiments(tmp_path):
    bio = compose_config(["experiment=sccl_biomedical"], tmp_path)
    so = compose_config(["experiment=sccl_stackoverflow"], tmp_path)
    assert bio.method.alpha == 10 and so.method.alpha == 1
    # the authors' README command: lr 1e-5 (x100 for the heads), --eta 10 on the instance loss, two
    # contextual-substitution views, 3000 iterations, evaluation every 100, float32 on a GPU
    assert so.batch_size == 400 and so.method.lr == 1e-5 and so.method.head_lr_multiplier == 100
    assert so.method.temperature == 0.5 and so.backbone.name.endswith("distilbert-base-nli-stsb-mean-tokens")
    assert so.method.instance_weight == 10 and so.method.loss_weights == "reference"
    assert so.dataset.file == "stackoverflow_trans_subst_20.csv" and list(so.dataset.aug_columns) == ["text1", "text2"]
    assert so.dataset.text_column == "text" and so.dataset.augmentation == "explicit"
    assert so.trainer.max_steps == 3000 and so.trainer.precision == "32-true" and so.trainer.accelerator == "gpu"
    assert so.dataset.callbacks.clustering_eval.every_n_steps == 100


@pytest.mark.parametrize("override", ["dataset=nosuchset", "method=nosuchmethod"])
def test_unknown_group_option_lists_the_choices(override, tmp_path):
    with pytest.raises(MissingConfigException, match=r"Could not find '(dataset|method)/nosuch"):
        compose_config([override], tmp_path)


def test_default_config_is_sccl_on_demo_with_minilm(tmp_path):
    cfg = compose_config([], tmp_path)
    assert (cfg.method.name, cfg.dataset.name, cfg.backbone.name) == ("sccl", "demo", "minilm")
    assert Path(cfg.dataset.data_dir, cfg.dataset.file).exists()
