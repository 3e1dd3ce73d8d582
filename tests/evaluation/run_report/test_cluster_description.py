"""Cluster descriptions, confusion matrices, assignment maths and plot helpers (unit tier)."""
import math

import numpy as np
import pandas as pd
import pytest
import torch

from evaluation.clustering.catalogue import cluster_accuracy
from evaluation.clustering.confusion import matched_confusion
from evaluation.model_io.predict import nearest_centroid, probabilities_to_assignment
from evaluation.run_report.ctfidf import class_term_counts, ctfidf_weights, top_words
from evaluation.run_report.describe import describe_clusters, markdown, representative_rows
from evaluation.run_report.plots import curve_panels, palette, project_2d, stage_boundaries, subsample


# -- c-TF-IDF -------------------------------------------------------------------------------------------------
def test_ctfidf_matches_hand_computed_weights():
    # class 0: apple x2, banana (3 words); class 1: banana, cherry (2 words); A = 5 / 2 = 2.5
    counts, vocabulary = class_term_counts(["apple apple banana", "banana cherry"], [0, 1])
    assert vocabulary == ["apple", "banana", "cherry"]
    assert counts.tolist() == [[2, 1, 0], [0, 1, 1]]
    weights = ctfidf_weights(counts)
    assert weights[0, 0] == pytest.approx(2 / 3 * math.log(1 + 2.5 / 2))  # f_apple = 2
    assert weights[0, 1] == pytest.approx(1 / 3 * math.log(1 + 2.5 / 2))  # f_banana = 2
    assert weights[1, 2] == pytest.approx(1 / 2 * math.log(1 + 2.5 / 1))  # f_cherry = 1
    assert weights[1, 0] == 0.0


def test_distinctive_word_of_each_cluster_comes_first():
    # every cluster shares "weather", "today" and "news"; one word is its own in every text, and a
    # frequent word of another cluster ("match") leaks into cluster 2 once
    texts, clusters = [], []
    for cluster, (own, other) in enumerate([("pasta", "oven"), ("telescope", "orbit"), ("goalkeeper", "match")]):
        for i in range(6):
            texts.append(f"{own} weather today news {other if i % 2 else ''} the and of")
            clusters.append(cluster)
    texts.append("match weather today news")
    clusters.append(0)
    words = top_words(texts, clusters, top_n=4)
    assert [w[0][0] for w in words] == ["pasta", "telescope", "goalkeeper"]
    assert all(w not in {"the", "and", "of"} for row in words for w, _ in row)  # stop words removed
    assert [w for w, _ in words[0]][-1] in {"weather", "today", "news"}  # shared words rank last


def test_top_words_of_empty_cluster_and_stop_word_only_corpus():
    words = top_words(["alpha beta", "gamma"], [0, 2], num_classes=3)
    assert words[1] == [] and [w for w, _ in words[0]] == ["alpha", "beta"]
    assert top_words(["the and", "of a"], [0, 1]) == [[], []]


# -- describing clusters -----------------------------------------------------------------------------------------
def test_representatives_are_nearest_the_mean_and_distinct():
    embeddings = np.array([[0.0, 0.0], [1.0, 0.0], [1.0, 0.0], [5.0, 0.0], [1.2, 0.0]])
    texts = ["far left", "dup", "dup", "outlier", "near"]
    # mean of rows 0..4 = 1.64: nearest are 1.2 (row 4), 1.0 (rows 1, 2: one text), then 0.0
    assert representative_rows(embeddings, np.arange(5), texts, 3) == [4, 1, 0]


def test_describe_clusters_sizes_majority_purity_and_markdown():
    texts = ["red apple", "green apple", "apple pie", "blue sky", "sky clouds"]
    embeddings = np.eye(5)
    labels = ["fruit", "fruit", "food", "sky", "sky"]
    clusters = describe_clusters(texts, [0, 0, 0, 2, 2], embeddings, labels, num_clusters=3, top_n=3)
    assert [c["size"] for c in clusters] == [3, 0, 2]
    assert clusters[0]["majority_label"] == "fruit" and clusters[0]["purity"] == pytest.approx(2 / 3, abs=1e-4)
    assert clusters[0]["top_words"][0][0] == "apple"
    assert clusters[1]["majority_label"] is None and clusters[1]["representatives"] == []
    assert clusters[2]["purity"] == 1.0 and len(clusters[2]["representatives"]) == 2
    md = markdown({"title": "t", "num_texts": 5, "num_clusters": 3, "primary": "kmeans",
                   "partitions": {"kmeans": clusters}})
    assert "| 0 | 3 | fruit | 66.7% | apple" in md and "Empty: no text" in md


# -- confusion matrix ---------------------------------------------------------------------------------------------
def test_matched_confusion_hand_computed():
    labels = ["a", "a", "a", "b", "b", "c", "c", "c"]
    predictions = [2, 2, 0, 0, 0, 1, 1, 2]
    # counts (class x cluster 0,1,2): a [1,0,2], b [2,0,0], c [0,2,1]; best match a-2, b-0, c-1 (6 texts)
    confusion = matched_confusion(labels, predictions)
    assert confusion.classes == ["a", "b", "c"] and confusion.clusters == [2, 0, 1]
    assert confusion.matrix.tolist() == [[2, 1, 0], [0, 2, 0], [1, 0, 2]]
    assert confusion.accuracy == pytest.approx(6 / 8) == cluster_accuracy(labels, predictions)


def test_matched_confusion_more_and_fewer_clusters_than_classes():
    more = matched_confusion(["x", "x", "y", "y"], [3, 3, 1, 0], num_clusters=5)
    # x-3 (2), y-1 or y-0 (1): the matched clusters first, then the rest by id, empty cluster 2 and 4 included
    assert more.clusters[0] == 3 and more.matrix.shape == (2, 5) and more.matrix[0, 0] == 2
    assert sorted(more.clusters) == [0, 1, 2, 3, 4] and more.accuracy == pytest.approx(3 / 4)
    fewer = matched_confusion(["p", "q", "q", "r", "r", "r"], [0, 1, 1, 0, 0, 0])
    # r-0 (3), q-1 (2); p has no cluster and moves to the last row
    assert fewer.classes == ["q", "r", "p"] and fewer.clusters == [1, 0]
    assert fewer.matrix.tolist() == [[2, 0], [0, 3], [0, 1]] and fewer.matched.tolist() == [True, True, False]
    assert fewer.accuracy == pytest.approx(5 / 6) == cluster_accuracy(["p", "q", "q", "r", "r", "r"],
                                                                      [0, 1, 1, 0, 0, 0])


# -- assignment of new texts ----------------------------------------------------------------------------------------
def test_nearest_centroid_cosine_and_margin():
    centroids = np.array([[1.0, 0.0], [0.0, 1.0]])
    cluster, cosine, margin = nearest_centroid(np.array([[2.0, 0.0], [0.5, 0.5], [0.0, -1.0]]), centroids)
    assert cluster[0] == 0 and cosine[0] == pytest.approx(1.0)
    assert margin[0] == pytest.approx(1 - 1 / math.sqrt(5))  # distances 1 and sqrt(5)
    assert margin[1] == pytest.approx(0.0)  # halfway
    assert cosine[2] == pytest.approx(0.0) and cluster[2] == 0  # distances sqrt(2) and 2


def test_probabilities_to_assignment():
    p = torch.tensor([[0.1, 0.7, 0.2], [0.5, 0.25, 0.25]])
    cluster, confidence, margin = probabilities_to_assignment(p)
    assert cluster.tolist() == [1, 0]
    assert confidence == pytest.approx([0.7, 0.5]) and margin == pytest.approx([0.5, 0.25])


def test_attention_head_sees_context_and_itself_only():
    from lightning_modules.aecl.attention import SampleAttention
    from lightning_modules.aecl.module import AECL, ClusteringNetwork
    from lightning_modules.shared.heads import ContrastHead

    torch.manual_seed(0)
    module = torch.nn.Module()
    module.projector = ContrastHead(6, 4, normalize=False)
    module.attention = SampleAttention(4)
    module.cluster_head = ClusteringNetwork(4, 6, 3)
    module.eval()
    context, new = torch.randn(5, 6), torch.randn(4, 6)
    p = AECL.cluster_probabilities(module, new, context, chunk=3)
    with torch.no_grad():  # the last row of the module's own attention over [context; text]
        h, _ = module.attention(module.projector(torch.cat([context, new[2:3]])))
        expected = torch.softmax(module.cluster_head(h[-1:]), dim=1)
    assert torch.allclose(p[2:3], expected, atol=1e-6)
    assert torch.allclose(p.sum(1), torch.ones(4), atol=1e-6)
    # the other new texts do not matter: reversed input, same rows
    assert torch.allclose(AECL.cluster_probabilities(module, new.flip(0), context), p.flip(0), atol=1e-6)


# -- plot helpers ----------------------------------------------------------------------------------------------------
def test_palette_distinct_colours_up_to_many_classes():
    for n in (3, 8, 20, 152):
        colours = palette(n)
        assert len(colours) == n and len(set(colours)) == n
    assert palette(8) == palette(10)[:8]  # the first classes keep their colours as classes are added


def test_subsample_and_projection_are_seeded():
    assert subsample(10, 20).tolist() == list(range(10))
    rows = subsample(1000, 50, seed=3)
    assert len(set(rows.tolist())) == 50 and rows.tolist() == subsample(1000, 50, seed=3).tolist()
    x = np.random.default_rng(0).normal(size=(40, 8))
    for method in ("tsne", "pca"):
        a, b = project_2d(x, method, seed=1), project_2d(x, method, seed=1)
        assert a.shape == (40, 2) and np.allclose(a, b)


def test_curve_panels_and_stage_boundaries():
    frame = pd.DataFrame({
        "step": [0, 9, 10, 19, 20, 29],
        "train/loss": [None, 3.0, None, 2.0, None, 1.0],
        "train/instance_loss": [None, 2.0, None, 1.5, None, 1.0],
        "train/marginal_entropy_term": [None, None, None, None, None, -2.0],
        "train/stage": [None, 1, None, 2, None, 3],
        "val/kmeans_acc": [0.2, None, 0.3, None, 0.4, None],
        "val/ns": [0.8, None, 0.6, None, 0.5, None],
        "train/sim_positive": [None, 0.9, None, 0.8, None, 0.85],
    })
    panels = dict(curve_panels(frame.columns))
    assert panels["training loss"] == ["train/loss"]
    assert panels["loss term: instance_loss"] == ["train/instance_loss"]
    assert panels["loss term: marginal_entropy_term"] == ["train/marginal_entropy_term"]
    assert panels["clustering of the evaluation set"] == ["val/kmeans_acc"]
    assert any(keys == ["train/sim_positive"] for keys in panels.values())
    assert any(keys == ["val/ns"] for keys in panels.values())
    assert stage_boundaries(frame) == [(19, "stage 2"), (29, "stage 3")]
