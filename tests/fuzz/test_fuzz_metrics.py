"""Fuzzing the numbers a run reports: Hungarian ACC against a brute-force search over cluster-to-class maps (more
predicted clusters than classes included), the label-free criteria against hand-written formulas on degenerate
embeddings (identical points, one cluster, K = N, zero vectors), choose_k and its K ranges. A criterion is a correct
number or None with a reason; never NaN, inf or a convention such as torchmetrics' 1.0 for no spread."""
from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from tests.helpers.fuzz_strategies import budget, user_error_or
from tests.helpers.speed import KMEANS

# points on a coarse grid: exact ties and coinciding points are frequent, near-ties (which no formula can
# settle in floating point) never happen
GRID = st.sampled_from([-2.0, -1.0, -0.5, 0.0, 0.5, 1.0, 2.0])


@st.composite
def partitions(draw, min_n: int = 1, max_n: int = 9):
    n = draw(st.integers(min_n, max_n))
    d = draw(st.integers(1, 3))
    if draw(st.booleans()):  # a few distinct points, repeated
        pool = draw(st.lists(st.lists(GRID, min_size=d, max_size=d), min_size=1, max_size=3))
        points = [draw(st.sampled_from(pool)) for _ in range(n)]
    else:
        points = draw(st.lists(st.lists(GRID, min_size=d, max_size=d), min_size=n, max_size=n))
    ids = draw(st.lists(st.integers(0, n + 1), min_size=n, max_size=n))
    return np.array(points, dtype=np.float64), np.array(ids)


# -- Hungarian accuracy -------------------------------------------------------------------------------------
def brute_force_accuracy(labels, predictions) -> float:
    """Best share of texts whose cluster maps to their class, over every one-to-one map (clusters beyond the
    classes map to nothing and count as wrong)."""
    classes, clusters = sorted(set(labels)), sorted(set(predictions))
    size = max(len(classes), len(clusters))
    best = 0
    for image in itertools.permutations(range(size), len(clusters)):
        to_class = {c: classes[j] if j < len(classes) else None for c, j in zip(clusters, image)}
        best = max(best, sum(to_class[p] == y for p, y in zip(predictions, labels)))
    return best / len(labels)


@budget(fast=60, long=3000)
@given(st.integers(1, 10).flatmap(lambda n: st.tuples(
    st.lists(st.sampled_from(["a", "b", "c", "d"]), min_size=n, max_size=n),
    st.lists(st.integers(0, 5), min_size=n, max_size=n))))
@example((["a", "a", "b"], [0, 1, 2]))  # more predicted clusters than classes
@example((["a", "b", "c", "d"], [3, 3, 3, 3]))
def test_hungarian_accuracy_equals_brute_force(case):
    from evaluation.clustering.catalogue import cluster_accuracy
    from evaluation.clustering.metrics import clustering_scores

    labels, predictions = case
    assert cluster_accuracy(labels, predictions) == pytest.approx(brute_force_accuracy(labels, predictions))
    scores = clustering_scores(labels, predictions)
    assert all(math.isfinite(v) for v in scores.values())
    assert 0 <= scores["acc"] <= 1 and 0 <= scores["nmi"] <= 1 + 1e-12 and -1 <= scores["ari"] <= 1 + 1e-12


@budget(fast=40, long=2000)
@given(st.integers(1, 8).flatmap(lambda n: st.tuples(st.lists(st.integers(0, 4), min_size=n, max_size=n),
                                                     st.lists(st.integers(0, 4), min_size=n, max_size=n))))
def test_changed_share_is_one_minus_the_best_matching(case):
    from evaluation.clustering.label_free import changed_share

    previous, current = case
    assert changed_share(np.array(previous), np.array(current)) == pytest.approx(
        1 - brute_force_accuracy(previous, current))


# -- label-free criteria -----------------------------------------------------------------------------------
def cosine_distances(x):
    norms = np.linalg.norm(x, axis=1, keepdims=True)
    unit = np.divide(x, norms, out=np.zeros_like(x), where=norms > 0)  # a zero vector stays zero
    dist = np.clip(1 - unit @ unit.T, 0, 2)
    np.fill_diagonal(dist, 0)
    return dist


def naive_silhouette(x, ids):
    dist = cosine_distances(x)
    values = []
    for i in range(len(x)):
        own = [dist[i, j] for j in range(len(x)) if ids[j] == ids[i] and j != i]
        if not own:
            values.append(0.0)  # alone in its cluster: 0 by definition
            continue
        a = float(np.mean(own))
        b = min(float(np.mean([dist[i, j] for j in range(len(x)) if ids[j] == c])) for c in set(ids) if c != ids[i])
        values.append(0.0 if max(a, b) == 0 else (b - a) / max(a, b))
    return float(np.mean(values))


def naive_spread(x, ids):
    """(Calinski-Harabasz, Davies-Bouldin, Dunn) by their textbook formulas; None where one has no finite value."""
    clusters = sorted(set(ids))
    centre = {c: x[ids == c].mean(0) for c in clusters}
    within = sum(((x[ids == c] - centre[c]) ** 2).sum() for c in clusters)
    between = sum((ids == c).sum() * ((centre[c] - x.mean(0)) ** 2).sum() for c in clusters)
    n, k = len(x), len(clusters)
    ch = None if within == 0 else (between / (k - 1)) / (within / (n - k))
    spread = {c: np.mean([np.linalg.norm(p - centre[c]) for p in x[ids == c]]) for c in clusters}
    gaps = {(a, b): np.linalg.norm(centre[a] - centre[b]) for a in clusters for b in clusters if a != b}
    db = None if min(gaps.values()) == 0 else float(np.mean(
        [max((spread[a] + spread[b]) / gaps[a, b] for b in clusters if b != a) for a in clusters]))
    widest = max(np.linalg.norm(p - centre[c]) for c in clusters for p in x[ids == c])
    dunn = None if widest == 0 else min(gaps.values()) / widest
    return ch, db, dunn


@budget(fast=80, long=4000)
@given(partitions(), st.integers(1, 12))
@example((np.array([[0.0, 1.0], [1.0, 0.0]]), np.array([0, 1])), 2)  # K = N = 2: the label-free criteria are undefined
@example((np.ones((4, 2)), np.array([0, 0, 1, 1])), 2)  # identical points in two clusters
@example((np.zeros((3, 1)), np.array([0, 1, 1])), 2)  # zero vectors
@example((np.array([[1.0], [1.0], [2.0]]), np.array([0, 0, 0])), 3)  # one cluster
def test_label_free_criteria_are_right_or_null_with_a_reason(case, num_clusters):
    from evaluation.clustering.label_free import GEOMETRIC, label_free_report

    x, ids = case
    scores, reasons = label_free_report(x, ids, num_clusters, previous=ids[::-1].copy())
    for name, value in scores.items():
        assert value is None or (isinstance(value, float) and math.isfinite(value)), (name, value)
        assert (value is None) == (name in reasons), (name, value, reasons)
    assert set(reasons) <= set(GEOMETRIC)
    k, n = len(set(ids.tolist())), len(ids)
    if not 2 <= k <= n - 1:
        assert all(scores[name] is None for name in GEOMETRIC)
        assert f"{k} cluster" in reasons["silhouette"] and f"{n} texts" in reasons["silhouette"]
    else:
        assert scores["silhouette"] == pytest.approx(naive_silhouette(x, ids), abs=1e-9)
        for name, expected in zip(("calinski_harabasz", "davies_bouldin", "dunn"), naive_spread(x, ids)):
            if expected is None:
                assert scores[name] is None
            else:
                assert scores[name] == pytest.approx(expected, rel=1e-6, abs=1e-9), name
    counts = np.unique(ids, return_counts=True)[1] / n
    expected_entropy = 0.0 if max(num_clusters, k) < 2 else float(-(counts * np.log(counts)).sum()
                                                                   / math.log(max(num_clusters, k)))
    assert scores["size_entropy"] == pytest.approx(expected_entropy, abs=1e-12)
    assert 0 <= scores["changed"] <= 1


@budget(fast=30, long=1500)
@given(partitions(max_n=6), st.integers(0, 6))
def test_silhouette_on_a_sample_is_null_when_the_sample_is_degenerate(case, sample):
    """The silhouette runs on a sample of at most ``sample`` texts; a sample with K outside 2..n-1 gives null."""
    from evaluation.clustering.label_free import label_free_report

    x, ids = case
    scores, reasons = label_free_report(x, ids, 2, sample=sample)
    if scores["silhouette"] is None:
        assert "silhouette" in reasons
    else:
        assert math.isfinite(scores["silhouette"]) and -1 <= scores["silhouette"] <= 1


def test_embeddings_with_nan_give_null_criteria_with_the_reason():
    from evaluation.clustering.label_free import label_free_report

    x = np.array([[0.0, 1.0], [np.nan, 0.0], [1.0, 1.0], [2.0, 0.0]])
    scores, reasons = label_free_report(x, np.array([0, 0, 1, 1]), 2)
    assert scores["silhouette"] is None and "NaN" in reasons["dunn"]


# -- choose_k ----------------------------------------------------------------------------------------------
K_SPECS = st.one_of(
    st.builds(lambda a, b: f"{a}:{b}", st.integers(-2, 12), st.integers(-2, 12)),
    st.builds(lambda a, b, c: f"{a}:{b}:{c}", st.integers(0, 8), st.integers(0, 12), st.integers(-1, 4)),
    st.lists(st.integers(-1, 12), max_size=4).map(lambda ks: ",".join(map(str, ks))),
    st.text(st.sampled_from("0123456789:,- ab"), max_size=8),
)


@budget(fast=40, long=2000)
@given(K_SPECS, st.one_of(st.none(), st.integers(0, 15)))
@example("20:2", 5)  # a reversed range: the message names N and a range to use
@example("2:60", 2)
def test_parse_k_gives_a_valid_range_or_one_line_naming_it(spec, n_texts):
    from evaluation.clustering.choose_k import parse_k

    with user_error_or(f"'{spec}'") as outcome:
        ks = parse_k(spec, n_texts)
    if outcome["error"] is not None:
        assert "None" not in outcome["error"]
        if n_texts is not None:
            assert str(n_texts) in outcome["error"] or "lo:hi" in outcome["error"]
        return
    assert ks == sorted(set(ks)) and all(k >= 2 and (n_texts is None or k < n_texts) for k in ks)


@budget(fast=15, long=400)
@given(partitions(min_n=1, max_n=10), K_SPECS, st.sampled_from(list(("silhouette", "calinski_harabasz",
                                                                     "davies_bouldin", "stability"))))
@example((np.ones((6, 2)), np.zeros(6, dtype=int)), "2:4", "silhouette")  # identical texts
@example((np.eye(3), np.zeros(3, dtype=int)), "2:5", "silhouette")  # K = N is left out
def test_choose_k_recommends_a_scanned_k_or_says_why_not(case, spec, rule):
    from evaluation.clustering.choose_k import RULES, choose_k, to_markdown

    x, _ = case
    with user_error_or(f"'{spec}'", "no K has a finite") as outcome:
        result = choose_k(x.astype(np.float32), spec, seeds=2, rule=rule, hdbscan_min_cluster_size=2,
                          kmeans_backend=KMEANS)
    if outcome["error"] is not None:
        return
    ks = result["ks"]
    assert ks and all(2 <= k <= len(x) - 1 for k in ks) and [r["k"] for r in result["rows"]] == ks
    for row in result["rows"]:
        for key in ("silhouette", "calinski_harabasz", "davies_bouldin", "stability", "size_entropy", "inertia"):
            assert row[key] is None or math.isfinite(row[key]), (key, row)
    key, direction = RULES[rule]
    finite = [(r[key], r["k"]) for r in result["rows"] if r[key] is not None]
    best = max(finite, key=lambda vk: (vk[0] if direction == "max" else -vk[0], -vk[1]))
    assert result["recommended"]["k"] == best[1]
    assert "Recommended K" in to_markdown(result, "fuzz")


@budget(fast=30, long=1500)
@given(st.lists(st.one_of(st.none(), st.floats(allow_nan=True, allow_infinity=True, width=32)), max_size=6),
       st.sampled_from(["max", "min", None]))
def test_best_index_ignores_undefined_values(values, direction):
    from evaluation.clustering.label_free import best_index

    i = best_index(values, direction)
    finite = [v for v in values if v is not None and math.isfinite(v)]
    if not finite or direction is None:
        assert i is None
        return
    assert values[i] == (max(finite) if direction == "max" else min(finite))


@budget(fast=30, long=1500)
@given(partitions(min_n=1, max_n=10), st.integers(1, 10), st.sampled_from(["fast", "sklearn", "faiss", "torch"]),
       st.integers(0, 3))
@example((np.ones((5, 2)), np.zeros(5, dtype=int)), 3, "fast", 0)  # more clusters than distinct points
def test_kmeans_of_every_backend_reports_its_own_partition(case, k, backend, seed):
    """KMeans as training and evaluation use it, on coinciding points too: ids in 0..K-1, finite centres, and the
    inertia is the sum of squared distances to the assigned centres (the number choose_k compares)."""
    from textcore.kmeans import kmeans_fit

    x, _ = case
    if k > len(x):
        return  # the data checks refuse K > texts before any KMeans (tests/fuzz/test_fuzz_readers.py)
    with user_error_or("K", "cluster") as outcome:
        fit = kmeans_fit(x.astype(np.float32), k, seed, 1, backend)
    if outcome["error"] is not None:
        return
    assert fit.labels_.shape == (len(x),) and fit.labels_.min() >= 0 and fit.labels_.max() < k
    assert fit.cluster_centers_.shape == (k, x.shape[1]) and np.isfinite(fit.cluster_centers_).all()
    inertia = float(((x - fit.cluster_centers_[fit.labels_].astype(np.float64)) ** 2).sum())
    assert fit.inertia_ == pytest.approx(inertia, rel=1e-4, abs=1e-4)
