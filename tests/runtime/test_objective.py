"""The `objective` key: what run.py returns to Hydra sweepers, per method; clear errors."""
import json

import pytest

from runtime.objective import (
    ObjectiveError,
    check_sources,
    lookup,
    numeric_paths,
    objective_entry,
    raise_if_error,
)
from tests.helpers import CONF
from textcore.errors import UserError

CLUSTERING = {
    "method": "sccl",
    "steps": 4,
    "clustering": {
        "final": {"step": 4, "kmeans_acc": 0.61, "kmeans_nmi": 0.5, "head_acc": 0.66, "head_nmi": 0.52},
        "history": [{"step": 2, "kmeans_acc": 0.1}],
    },
    "final": {"step": 4, "kmeans_acc": 0.61, "head_acc": 0.66},
}
STS = {
    "method": "clusterns",
    "sts_selection": {"best": 0.71, "best_step": 250, "history": [{"step": 125, "stsb_dev": 0.6}]},
    "sts": {"spearman": {"STS12": 0.6, "STSB": 0.7}, "avg": 0.65},
}



def declared_default(method: str) -> str | None:
    """The ``default_objective`` the method's class declares (None for a method of the user's own)."""
    from omegaconf import OmegaConf

    from lightning_modules.shared.registry import import_class

    conf = CONF / "method" / f"{method}.yaml"
    return import_class(OmegaConf.load(conf)._target_).default_objective if conf.exists() else None


@pytest.mark.parametrize(
    "method, results, expected",
    [
        ("sccl", CLUSTERING, ("clustering.final.kmeans_acc", 0.61)),
        ("aecl", CLUSTERING, ("clustering.final.head_acc", 0.66)),
        ("clusterns", STS, ("sts_selection.best", 0.71)),
        ("simcse", STS, ("sts_selection.best", 0.71)),
        ("pairsupcon", {"sts": {"avg": 0.9, "dev": {"spearman": 0.42}}}, ("sts.dev.spearman", 0.42)),
        ("my_method", STS, ("sts_selection.best", 0.71)),  # unknown method: first default that exists
    ],
)
def test_auto_objective_per_method_never_a_test_score(method, results, expected):
    entry = objective_entry("auto", declared_default(method), results)
    assert (entry["name"], entry["value"]) == expected
    assert entry["direction"] == "maximize" and "error" not in entry
    # STS12-16 / STS-B test / SICK-R are test scores (sts.dev is STS-B dev)
    assert not entry["name"].startswith(("sts.spearman", "sts.avg", "final_evaluation"))


def test_auto_without_labels_gives_no_objective_and_says_why():
    unlabelled = {"method": "sccl", "clustering": {"final": {"step": 4, "epoch": 0}}}
    entry = objective_entry("auto", declared_default("sccl"), unlabelled)
    assert entry["name"] is None and entry["value"] is None and "no default objective" in entry["note"]
    assert raise_if_error(entry) is None


def test_named_objective_and_null():
    assert objective_entry("clustering.final.head_nmi", declared_default("sccl"), CLUSTERING)["value"] == 0.52
    # a test score is allowed when asked for explicitly
    assert objective_entry("sts.avg", declared_default("clusterns"), STS)["value"] == 0.65
    assert objective_entry(None, declared_default("sccl"), CLUSTERING)["name"] is None


def test_missing_key_lists_the_numbers_that_exist():
    entry = objective_entry("clustering.final.kmeans_accuracy", declared_default("sccl"), CLUSTERING)
    assert entry["value"] is None
    with pytest.raises(ObjectiveError) as err:
        raise_if_error(entry)
    message = str(err.value)
    assert isinstance(err.value, UserError)
    assert "clustering.final.kmeans_accuracy" in message and "clustering.final.kmeans_acc," in message
    assert "clustering.final.head_nmi" in message and "history" not in message  # lists skipped


def test_other_ddp_ranks_do_not_fail_on_rank_zero_only_sections():
    entry = objective_entry("sts.avg", declared_default("pairsupcon"), {"sts": None}, rank_zero=False)
    assert entry["value"] is None and "error" not in entry
    # rank 0 (or one process)
    assert "error" in objective_entry("sts.avg", declared_default("pairsupcon"), {"sts": None})


def test_a_section_is_not_a_number():
    entry = objective_entry("clustering.final", declared_default("sccl"), CLUSTERING)
    assert "not a number" in entry["error"] and "clustering.final.kmeans_acc" in entry["error"]


def test_lookup_and_numeric_paths():
    assert lookup(STS, "sts.spearman.STSB") == 0.7
    with pytest.raises(KeyError, match="sts.pearson"):
        lookup(STS, "sts.pearson.STSB")
    assert numeric_paths({"a": {"b": 1, "c": True, "d": [1]}, "e": 2.0}) == ["a.b", "e"]


def test_objective_checked_against_the_runs_callbacks_before_training():
    check_sources("sts_selection.best", ["clustering", "sts_selection"])
    check_sources("final.kmeans_acc", ["clustering"])  # run.py's top-level copy of clustering.final
    check_sources("steps", [])  # not a callback section: checked at the end
    check_sources("auto", [])
    with pytest.raises(ObjectiveError, match=r"sts_selection.*clustering"):
        check_sources("sts_selection.best", ["clustering", ""])


def test_search_spaces_name_an_objective_for_their_method():
    from omegaconf import OmegaConf

    for name, expected in [("sccl_optuna", "clustering.final.kmeans_acc"), ("aecl_optuna", "clustering.final.head_acc"),
                           ("clusterns_optuna", "sts_selection.best"), ("pairsupcon_optuna", "sts.dev.spearman")]:
        cfg = OmegaConf.load(CONF / "hparams_search" / f"{name}.yaml")
        assert cfg.objective == expected and cfg.hydra.sweeper.direction == "maximize"


def test_run_with_a_wrong_objective_keeps_its_results_and_raises(toy_corpus, tmp_path):
    from ctclust.training.train import train
    from tests.helpers import compose_config, toy_overrides

    out = tmp_path / "run"
    results = train(compose_config(toy_overrides(toy_corpus, steps=2) + ["objective=clustering.final.kmeans_accuracy"],
                                   out))
    saved = json.loads((out / "results.json").read_text())  # the training is not lost
    assert saved["objective"]["value"] is None and "kmeans_accuracy" in saved["objective"]["error"]
    with pytest.raises(ObjectiveError, match="clustering.final.kmeans_acc,"):
        raise_if_error(results["objective"])  # run.main: one line "error: ...", exit 2


def test_objective_of_an_evaluation_the_run_lacks_stops_before_training(toy_corpus, tmp_path):
    from ctclust.training.train import train
    from tests.helpers import compose_config, toy_overrides

    out = tmp_path / "run"
    with pytest.raises(ObjectiveError, match="needs STS-B dev selection.*sections are: clustering"):
        train(compose_config(toy_overrides(toy_corpus) + ["objective=sts_selection.best"], out))
    assert not (out / "checkpoints").exists()


def test_default_objective_of_a_clustering_run(toy_corpus, tmp_path):
    from ctclust.training.train import train
    from tests.helpers import compose_config, toy_overrides

    results = train(compose_config(toy_overrides(toy_corpus, steps=2), tmp_path / "run"))
    assert results["objective"]["name"] == "clustering.final.kmeans_acc"
    assert results["objective"]["value"] == results["clustering"]["final"]["kmeans_acc"]
