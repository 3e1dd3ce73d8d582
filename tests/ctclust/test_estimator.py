"""TextClusterer as a scikit-learn estimator (docs/python.md): the parameter contract, the common checks that apply
to an estimator of texts, a Pipeline and a GridSearchCV, one loaded model for every later predict, and what fit
prints."""
from __future__ import annotations

import numpy as np
import pytest
from sklearn.base import clone
from sklearn.exceptions import NotFittedError
from sklearn.metrics import make_scorer, normalized_mutual_info_score
from sklearn.model_selection import GridSearchCV
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import FunctionTransformer
from sklearn.utils import estimator_checks
from sklearn.utils._tags import get_tags

from ctclust import TextClusterer, load_demo

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")

# a short run of the tiny backbone, without the report's plots and the layer table
QUICK = ["trainer.max_steps=4", "batch_size=16", "callbacks.report.plots=false",
         "dataset.callbacks.clustering_eval.every_n_steps=2", "dataset.callbacks.clustering_eval.kmeans_n_init=2",
         "method.callbacks.centroid_init.n_init=2"]

# the common checks of sklearn.utils.estimator_checks that apply to an estimator of texts: they build, clone,
# inspect and set parameters, and call predict before fit. Skipped, because they fit on numeric 2D arrays, which are
# not texts (the tags say so, and check_estimator runs none of its checks for such an estimator): every check of
# _yield_checks / _yield_clustering_checks / _yield_transformer_checks (dtypes, NaN/inf, sparse input, empty data,
# pickling after a fit, subset/sample-order invariance, 1-sample/1-feature fits, n_features_in_, idempotent fit,
# clusterer label dtypes) and the API checks that fit (check_fit_score_takes_y, check_estimators_overwrite_params,
# check_dont_overwrite_parameters, check_estimators_fit_returns_self, check_readonly_memmap_input,
# check_n_features_in_after_fitting, check_positive_only_tag_during_fit). Their contract on texts (fit returns
# self, parameters unchanged by fit, clone of a fitted estimator) is tested below on a corpus.
APPLICABLE_CHECKS = ["check_estimator_cloneable", "check_estimator_tags_renamed", "check_valid_tag_types",
                     "check_estimator_repr", "check_no_attributes_set_in_init", "check_estimators_unfitted",
                     "check_do_not_raise_errors_in_init_or_set_params", "check_mixin_order",
                     "check_parameters_default_constructible", "check_get_params_invariance", "check_set_params"]


def corpus(n: int = 96):
    demo = load_demo().sample(n, random_state=1).reset_index(drop=True)
    return demo["text"], demo["label"]


@pytest.mark.parametrize("check", APPLICABLE_CHECKS)
def test_scikit_learn_common_checks_that_apply_to_texts(check):
    getattr(estimator_checks, check)("TextClusterer", TextClusterer(num_clusters=8, backbone="tiny"))


def test_tags_declare_text_input_and_check_estimator_runs_no_numeric_check():
    tags = get_tags(TextClusterer())
    assert tags.input_tags.string and not tags.input_tags.two_d_array and not tags.target_tags.required
    with pytest.warns(estimator_checks.SkipTestWarning, match="requires input"):
        estimator_checks.check_estimator(TextClusterer(), on_fail=None)


def test_parameters_are_stored_as_given_and_round_trip():
    overrides = {"trainer.max_steps": 5}
    clusterer = TextClusterer(num_clusters=1, overrides=overrides, backend="no such backend")  # checked by fit
    params = clusterer.get_params()
    assert params["num_clusters"] == 1 and params["overrides"] is overrides and params["backend"] == "no such backend"
    assert set(params) == {"method", "backbone", "num_clusters", "overrides", "seed", "run_dir", "text_column",
                           "verbose", "backend", "trust_checkpoint"}
    assert clusterer.set_params(num_clusters=6, seed=7) is clusterer
    assert clusterer.get_params()["num_clusters"] == 6 and clusterer.seed == 7
    twin = clone(clusterer)
    assert twin is not clusterer and twin.get_params() == clusterer.get_params()
    with pytest.raises(ValueError, match="Invalid parameter"):
        clusterer.set_params(max_steps=3)


def test_predict_and_transform_before_fit_raise_not_fitted():
    for call in (TextClusterer().predict, TextClusterer().transform):
        with pytest.raises(NotFittedError):
            call(["a text"])


@pytest.fixture(scope="module")
def fitted(tmp_path_factory):
    texts, labels = corpus()
    clusterer = TextClusterer(backbone="tiny", num_clusters=4, overrides=QUICK, seed=5, verbose=False,
                              run_dir=tmp_path_factory.mktemp("estimator") / "run")
    assert clusterer.fit(texts, labels) is clusterer
    return clusterer, texts


def test_fit_keeps_its_parameters_and_a_clone_is_unfitted(fitted):
    clusterer, texts = fitted
    assert clusterer.get_params()["overrides"] == QUICK and clusterer.num_clusters == 4
    assert clusterer.labels_.shape == (len(texts),)
    twin = clone(clusterer)
    assert twin.get_params() == clusterer.get_params()
    assert not hasattr(twin, "labels_") and not hasattr(twin, "model_")
    with pytest.raises(NotFittedError):
        twin.predict(["a text"])


def test_predict_loads_the_model_once_builds_no_trainer_and_equals_the_command(fitted, tmp_path, monkeypatch):
    """The in-memory path (one load, no Trainer, no file) gives the clusters of ``tools.py predict``."""
    import lightning
    import pandas as pd

    from evaluation.model_io import predict as command

    clusterer, texts = fitted
    new = ["how do I revert a git commit", "", "which telescope sees the faintest galaxies", *texts[:20]]
    path = tmp_path / "new.csv"
    pd.DataFrame({"text": new}).to_csv(path, index=False)
    rows = command.predict(clusterer.run_dir_, path, top_n=0)
    expected = np.array([-1 if row["cluster"] == "" else int(row["cluster"]) for row in rows])

    loads = []
    original = command.load_cluster_model
    monkeypatch.setattr(command, "load_cluster_model", lambda *args: loads.append(args) or original(*args))
    clusterer._forget_model()

    def no_trainer(*args, **kwargs):
        raise AssertionError("predict built a Trainer")

    monkeypatch.setattr(lightning.Trainer, "__init__", no_trainer)
    first = clusterer.predict(new)
    again = clusterer.predict(new[:3])
    assert len(loads) == 1
    assert first.tolist() == expected.tolist() and again.tolist() == expected[:3].tolist()
    assert clusterer.transform(new[:2]).shape == (2, 32) and len(loads) == 1  # the tiny backbone: d = 32


@pytest.mark.slow
def test_a_pipeline_after_a_text_cleaning_step(tmp_path):
    texts, _ = corpus(64)
    clean = FunctionTransformer(lambda values: [v.lower().strip() for v in values])
    pipeline = make_pipeline(clean, TextClusterer(backbone="tiny", num_clusters=3, overrides=QUICK, seed=2,
                                                  verbose=False, run_dir=tmp_path / "run"))
    labels = pipeline.fit_predict(texts)
    assert labels.shape == (64,) and set(labels) <= {0, 1, 2}
    fitted = pipeline[-1]
    assert (fitted.run_dir_ / "texts.csv").read_text().count("\n") >= 64
    assert "How" not in (fitted.run_dir_ / "texts.csv").read_text()  # the cleaned texts were trained on
    assert pipeline.predict(["HOW DO I REVERT A GIT COMMIT"]).tolist() == fitted.predict(
        ["how do i revert a git commit"]).tolist()
    assert pipeline.transform(texts[:3]).shape == (3, 32)


@pytest.mark.slow
def test_a_two_point_grid_search_with_a_label_based_scorer(tmp_path):
    texts, labels = corpus(96)
    search = GridSearchCV(TextClusterer(backbone="tiny", num_clusters=4, overrides=QUICK, verbose=False,
                                        run_dir=tmp_path / "run"),
                          {"seed": [1, 2]}, scoring=make_scorer(normalized_mutual_info_score), cv=2,
                          error_score="raise")
    search.fit(list(texts), list(labels))
    assert list(search.cv_results_["param_seed"]) == [1, 2]
    assert np.isfinite(search.cv_results_["mean_test_score"]).all()
    assert search.best_estimator_.get_params()["seed"] == search.best_params_["seed"]
    runs = sorted(p.name for p in tmp_path.iterdir())
    assert len(runs) == 5, runs  # 2 seeds x 2 folds + the refit, each in a folder of its own
    assert search.predict(list(texts[:5])).shape == (5,)


def test_verbose_fit_shows_progress_bars_and_no_lightning_noise(tmp_path, capfd):
    texts, _ = corpus(64)
    clusterer = TextClusterer(backbone="tiny", num_clusters=3, overrides=QUICK, seed=2, verbose=True,
                              run_dir=tmp_path / "run").fit(texts)
    out, err = capfd.readouterr()
    shown = out + err
    assert "training sccl (tiny) on 64 texts: 4 steps of 16 texts, K=3" in out  # the budget line
    assert "4/4 [" in shown and "it/s]" in shown  # the training bar (tqdm) reached its last step
    assert "results:" in out and "cluster head, after" in out  # the final table
    for noise in ("GPU available", "TPU available", "💡 Tip", "litlogger", "LeafSpec", "logging interval"):
        assert noise not in shown
    clusterer.predict(texts[:5])
    out, err = capfd.readouterr()
    assert "embedding:" in err and "/5 [" in err  # a bar for the pass over the texts (tqdm draws its first frame;
    # the last one only when 0.1 s passed since the one before, and the finished bar is cleared)
    assert "GPU available" not in out + err


@pytest.mark.slow
def test_verbose_false_prints_nothing(tmp_path, capfd):
    texts, _ = corpus(64)
    clusterer = TextClusterer(backbone="tiny", num_clusters=3, overrides=QUICK, seed=2, verbose=False,
                              run_dir=tmp_path / "run").fit(texts)
    clusterer.predict(texts[:4])
    clusterer.transform(texts[:4])
    out, err = capfd.readouterr()
    assert out == "" and err == ""
