"""report.html: the page of a tiny trained run (structure, numbers, escaping, scripts), the describe --html
command, a run without clusters, and sampling 200k texts without training."""
import json
import re
from html import unescape

import numpy as np
import pandas as pd
import pytest

from ctclust.commands import describe
from ctclust.training.train import train
from evaluation.run_report.html.curves import nice_ticks
from evaluation.run_report.html.data import page_data
from evaluation.run_report.html.page import render_page, script_json
from evaluation.run_report.html.run_folder import write_run_page
from tests.helpers import compose_config, toy_overrides
from tests.helpers.data_files import toy_rows, write_csv

PAYLOADS = [
    "<script>alert(1)</script> planet orbit",
    "</script><img src=x onerror=\"document.body.setAttribute('data-pwned','1')\"> pasta sauce",
    "a & b <!-- comment --> &amp; compiler bug",
]
CHINESE = "机器学习模型的训练数据很重要"
ARABIC = "تعلم الآلة يحتاج إلى بيانات كثيرة"


def page_json(html: str) -> dict:
    found = re.search(r'<script type="application/json" id="report-data">(.*?)</script>', html, re.S)
    assert found, "no data element"
    return json.loads(found.group(1))


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
    """SCCL with the tiny backbone on 3 topics x 12 texts plus texts that must stay text and texts in two
    non-Latin scripts; 4 steps; PCA map."""
    import random

    folder = tmp_path_factory.mktemp("html")
    rows = toy_rows(random.Random(0))
    extra = PAYLOADS + [CHINESE, ARABIC]
    rows += [[label, text, text] for label, text in zip(["space", "food", "code", "code", "food"], extra)]
    data = write_csv(folder / "texts.csv", ["label", "text0", "text1"], rows)
    out = folder / "run"
    results = train(compose_config(toy_overrides(data, steps=4) + ["callbacks.report.html=true",
                                                                       "callbacks.report.projection=pca"], out))
    return out, results


def test_run_writes_a_page_with_every_text_its_clusters_and_its_numbers(tiny_run):
    out, results = tiny_run
    assert "report.html" in results["report"]["files"] and results["report"]["errors"] == []
    html = (out / "report.html").read_text(encoding="utf-8")
    data = page_json(html)
    predictions = pd.read_csv(out / "predictions.csv", keep_default_na=False)
    n = len(predictions)
    assert n == 41 and data["num_texts"] == data["num_shown"] == n and len(data["points"]["x"]) == n
    assert f"showing {n} of {n} texts." in unescape(html)
    assert all(0 <= v <= 1 for v in data["points"]["x"] + data["points"]["y"])
    # each point is the text of its predictions.csv row, in its cluster, with its label
    texts, labels = predictions["text"].tolist(), predictions["label"].tolist()
    for row, text, cluster, label in zip(data["points"]["row"], data["points"]["text"], data["points"]["cluster"],
                                         data["points"]["label"]):
        assert text == " ".join(texts[row].split()) and cluster == predictions["head_cluster"][row]
        assert data["classes"][label] == labels[row]
    assert data["classes"] == ["code", "food", "space"]
    # the clusters: sizes counted from predictions.csv, the terms of clusters.json
    described = json.loads((out / "clusters.json").read_text(encoding="utf-8"))["partitions"]["head"]
    sizes = np.bincount(predictions["head_cluster"], minlength=3).tolist()
    assert [c["size"] for c in data["clusters"]] == sizes and len(sizes) == 3
    assert [[t[0] for t in c["terms"]] for c in data["clusters"]] == [[w for w, _ in c["top_words"]] for c in described]
    for card in data["clusters"]:
        members = predictions[predictions["head_cluster"] == card["cluster"]]
        majority = members["label"].value_counts()
        assert card["purity"] == pytest.approx(majority.iloc[0] / len(members), abs=1e-4)
        assert card["majority_label"] in set(majority.index[majority == majority.iloc[0]])
        assert -1 <= card["silhouette"] <= 1 and -1 <= card["cohesion"] <= 1
        assert set(card["representatives"]) <= set(" ".join(t.split()) for t in members["text"])
    assert len(set(c["colour"] for c in data["clusters"])) == 3
    # the summary: the numbers of results.json as the end-of-run table prints them
    written = json.loads((out / "results.json").read_text())
    table = {row[0]: dict(zip(data["summary"]["columns"], row)) for row in data["summary"]["rows"]}
    after = table["KMeans on embeddings, after training"]
    assert after["ACC"] == f"{100 * written['final']['kmeans_acc']:.2f}"
    assert after["NMI"] == f"{100 * written['final']['kmeans_nmi']:.2f}"
    assert table["cluster head, after training"]["ARI"] == f"{100 * written['final']['head_ari']:.2f}"
    before = written["clustering"]["before"]
    assert table["KMeans on embeddings, before training"]["AMI"] == f"{100 * before['kmeans_ami']:.2f}"
    assert f"<td>{after['ACC']}</td>" in html
    # training curves as inline SVG, one panel with the loss; nothing loaded from elsewhere
    assert html.count("<svg") >= 2 and "training loss" in html and "<polyline" in html
    assert not re.search(r"https?://(?!www\.w3\.org/2000/svg)", html)
    assert not re.search(r"<(link|img|iframe)\b|\bsrc=", html.split('id="report-data">')[0])


def test_texts_stay_text_in_any_script(tiny_run):
    out, _ = tiny_run
    html = (out / "report.html").read_text(encoding="utf-8")
    # three script elements (error catcher, data, page script), whatever the texts hold
    assert html.count("</script>") == 3 and "<script>alert(1)" not in html and "<img" not in html
    raw = re.search(r'id="report-data">(.*?)</script>', html, re.S).group(1)
    assert "<" not in raw and ">" not in raw and "&" not in raw
    texts = set(page_json(html)["points"]["text"])
    assert set(PAYLOADS) | {CHINESE, ARABIC} <= texts


def test_describe_html_writes_the_page_of_an_older_run_with_the_tokenizer_setting(tiny_run, capsys):
    out, _ = tiny_run
    (out / "report.html").unlink()
    describe.main(["--run", str(out), "--html", "--tokenizer", "char:2-2", "--top-words", "1000", "--max-points", "20"])
    assert "report.html" in capsys.readouterr().out
    data = page_json((out / "report.html").read_text(encoding="utf-8"))
    assert data["num_shown"] == 20 and data["num_texts"] == 41 and len(set(data["points"]["row"])) == 20
    assert sum(c["on_map"] for c in data["clusters"]) == 20
    terms = [t for c in data["clusters"] for t, _ in c["terms"]]
    assert terms and all(len(t) == 2 for t in terms)
    # the Chinese and the Arabic texts' bigrams are terms of the clusters that hold them
    predictions = pd.read_csv(out / "predictions.csv", keep_default_na=False)
    for text, bigram in ((CHINESE, "机器"), (ARABIC, "تع")):
        cluster = int(predictions.loc[predictions["text"] == text, "head_cluster"].iloc[0])
        assert bigram in [t for t, _ in data["clusters"][cluster]["terms"]]
    describe.main(["--run", str(out)])  # the run's own descriptions back for the other tests
    for wrong, message in ((["--max-points", "5"], "add --html"), (["--html", "--max-points", "-1"], ">= 0")):
        with pytest.raises(SystemExit) as exit_info:
            describe.main(["--run", str(out), *wrong])
        assert exit_info.value.code == 2 and message in capsys.readouterr().err


def test_run_without_clusters_gets_its_summary_and_curves(tmp_path):
    run = tmp_path / "sts_run"
    (run / "csv").mkdir(parents=True)
    steps = np.arange(0, 100, 10)
    pd.DataFrame({"step": steps, "train/loss": 2.0 / (1 + steps), "val/stsb_spearman": np.nan}).to_csv(
        run / "csv" / "metrics.csv", index=False)
    (run / "results.json").write_text(json.dumps({"method": "simcse", "steps": 90,
                                                  "sts_selection": {"best": 0.7712, "best_step": 50}}))
    html = write_run_page(run).read_text(encoding="utf-8")
    data = page_json(html)
    assert data["points"] is None and data["clusters"] == []
    assert ["sts_selection.best", "0.7712"] in data["summary"]["rows"]
    assert "<td>sts_selection.best_step</td><td>50</td>" in html and "training loss" in html
    assert html.count("<polyline") == 1  # the empty STS column draws no curve


def test_script_json_cannot_close_its_element():
    value = {"text": "</script><script>x()</script><!-- & \u2028"}
    encoded = script_json(value)
    assert not set("<>&") & set(encoded) and json.loads(encoded) == value


def synthetic_200k(k: int = 30, d: int = 8):
    """200,000 texts in ``k`` Gaussian clusters of ``d``-dim embeddings, described as clusters.json would."""
    n = 200_000
    rng = np.random.default_rng(0)
    clusters = rng.integers(0, k, size=n)
    embeddings = ((rng.normal(size=(k, d)) * 4)[clusters] + rng.normal(size=(n, d))).astype(np.float32)
    texts = [f"text number {i} about topic{c} and a few more words to be realistic" for i, c in enumerate(clusters)]
    first = [int(np.flatnonzero(clusters == c)[0]) for c in range(k)]
    report = {"primary": "kmeans", "partitions": {"kmeans": [
        {"cluster": c, "size": int((clusters == c).sum()), "top_words": [[f"topic{c}", 1.0]],
         "representatives": [{"row": first[c], "text": texts[first[c]]}]} for c in range(k)]}}
    return texts, clusters, embeddings, report


def test_200k_texts_are_sampled_and_the_page_stays_small():
    texts, clusters, embeddings, report = synthetic_200k()
    n = len(texts)
    data = page_data(texts, clusters, embeddings, report, projection="pca", max_points=3000, seed=1,
                     title="synthetic")
    html = render_page(data, [])
    assert data["num_texts"] == n and data["num_shown"] == 3000
    rows = np.asarray(data["points"]["row"])
    assert len(np.unique(rows)) == 3000 and rows.min() >= 0 and rows.max() < n
    assert [data["points"]["text"][i] for i in (0, 2999)] == [texts[rows[0]], texts[rows[2999]]]
    assert data["points"]["cluster"] == clusters[rows].tolist()
    # every cluster is on the map about in proportion (100 expected each; a uniform sample)
    on_map = [c["on_map"] for c in data["clusters"]]
    assert sum(on_map) == 3000 and min(on_map) > 50
    assert sum(c["size"] for c in data["clusters"]) == n
    assert "showing 3,000 of 200,000 texts (a seeded random sample)" in html
    assert len(html.encode("utf-8")) < 1_000_000
    assert page_json(html)["points"]["row"] == rows.tolist()


@pytest.mark.parametrize("lo, hi", [(0.0091, 0.0297), (2.62, 2.67), (0, 150), (-1, 1), (1e5, 3.2e5), (3.1, 7.9)])
def test_curve_ticks_are_round_and_inside_the_range(lo, hi):
    ticks, decimals = nice_ticks(lo, hi)
    assert 2 <= len(ticks) <= 8 and all(lo <= t <= hi for t in ticks)
    steps = np.diff(ticks)
    assert np.allclose(steps, steps[0])
    mantissa = steps[0] / 10 ** np.floor(np.log10(steps[0]))
    assert min(abs(mantissa - m) for m in (1, 2, 5)) < 1e-9
    assert len({f"{t:.{decimals}f}" for t in ticks}) == len(ticks)  # the labels tell the ticks apart


def test_page_without_descriptions_names_the_command_that_makes_them(tiny_run, tmp_path):
    import shutil

    from evaluation.model_io.run_files import RunFolderError

    out, _ = tiny_run
    bare = tmp_path / "bare"
    bare.mkdir()
    shutil.copy(out / "predictions.csv", bare / "predictions.csv")
    with pytest.raises(RunFolderError,
                       match=r"has no clusters.json: run python tools.py describe .* --html"):
        write_run_page(bare, projection="pca")


def test_page_of_a_run_without_labels_shows_label_free_scores(toy_corpus, tmp_path):
    frame = pd.read_csv(toy_corpus)
    unlabelled = write_csv(tmp_path / "nolabels.csv", ["text0", "text1"], frame[["text0", "text1"]].values.tolist())
    out = tmp_path / "run"
    results = train(compose_config(toy_overrides(unlabelled, steps=2) + [
        "dataset.label_column=null", "dataset.num_clusters=3",
        "dataset.callbacks.clustering_eval.monitor=kmeans_silhouette", "callbacks.report.html=true",
        "callbacks.report.projection=pca"], out))
    html = (out / "report.html").read_text(encoding="utf-8")
    data = page_json(html)
    assert data["classes"] == [] and "label" not in data["points"] and len(data["clusters"]) == 3
    for card in data["clusters"]:
        assert "majority_label" not in card and "purity" not in card
        assert card["size"] == 0 or -1 <= card["silhouette"] <= 1
    table = {row[0]: dict(zip(data["summary"]["columns"], row)) for row in data["summary"]["rows"]}
    after = table["KMeans on embeddings, after training"]
    assert "ACC" not in after and after["silhouette"] == f"{results['final']['kmeans_silhouette']:.3f}"
    assert after["Davies-Bouldin"] == f"{results['final']['kmeans_davies_bouldin']:.3f}"
