"""What a c-TF-IDF term is (evaluation/run_report/ctfidf.py): words, character n-grams for scripts without spaces, or
backbone pieces."""
from __future__ import annotations

import pytest

from evaluation.run_report.ctfidf import class_term_counts, no_space_share, resolve_tokenizer, top_words
from textcore.errors import ConfigError

CHINESE = ["今天的足球比赛很精彩", "足球队赢得了比赛", "他喜欢看足球比赛", "这场足球比赛有三个进球",
           "妈妈在厨房做饭", "我学会了做红烧肉", "厨房里的饭菜很香", "晚饭做了番茄炒蛋"]
CLUSTERS = [0, 0, 0, 0, 1, 1, 1, 1]


def test_auto_picks_character_ngrams_for_chinese_and_words_for_spaced_text():
    assert no_space_share(CHINESE) == pytest.approx(1.0)
    assert resolve_tokenizer("auto", CHINESE) == "char:2-2"
    assert resolve_tokenizer("auto", ["Der Ball ist rund", "Das Spiel dauert neunzig Minuten"]) == "word"
    for bad in ("chars", "char:3-1", "char:0-2", "bpe"):
        with pytest.raises(ConfigError, match="tokenizer"):
            resolve_tokenizer(bad, CHINESE)


def test_chinese_clusters_get_meaningful_terms_only_with_character_ngrams():
    words = top_words(CHINESE, CLUSTERS, 2, top_n=3, tokenizer="word")
    # scikit-learn's word pattern takes each whole sentence as one "word": every term occurs once
    assert all(len(term) >= 7 for cluster in words for term, _ in cluster)
    grams = top_words(CHINESE, CLUSTERS, 2, top_n=6, tokenizer="auto")
    football, cooking = ({t for t, _ in c} for c in grams)
    assert "足球" in football and "比赛" in football
    assert "厨房" in cooking
    assert not football & cooking


def test_character_ngrams_never_span_spaces_and_stop_words_only_apply_to_words():
    counts, vocabulary = class_term_counts(["the cat", "a dog"], [0, 1], 2, tokenizer="char:2-3")
    assert "ca" in vocabulary and "cat" in vocabulary
    assert all(" " not in term for term in vocabulary)
    assert "th" in vocabulary  # "the" is a stop word, but not for character n-grams
    counts, vocabulary = class_term_counts(["the cat", "a dog"], [0, 1], 2, tokenizer="word")
    assert vocabulary == ["cat", "dog"]


def test_backbone_pieces_come_from_the_tokenizer_without_continuation_marks():
    from textcore.encoding.backbone import load_tokenizer

    docs = ["unbelievably good football", "cooking pasta tonight"]
    counts, vocabulary = class_term_counts(docs, [0, 1], 2, tokenizer="backbone", backbone="minilm")
    pieces = {p.replace("##", "") for text in docs for p in load_tokenizer("minilm").tokenize(text)}
    assert set(vocabulary) == pieces
    assert not any(term.startswith("##") for term in vocabulary)
    with pytest.raises(ConfigError, match="backbone"):
        class_term_counts(docs, [0, 1], 2, tokenizer="backbone")


def test_a_run_describes_chinese_clusters_with_character_ngrams(tmp_path):
    from evaluation.run_report.describe import describe_run

    run = tmp_path / "run"
    run.mkdir()
    rows = ["row,text,kmeans_cluster"] + [f"{i},{t},{c}" for i, (t, c) in enumerate(zip(CHINESE, CLUSTERS))]
    (run / "predictions.csv").write_text("\n".join(rows) + "\n", encoding="utf-8")
    import numpy as np

    report = describe_run(run, top_n=3, representatives=1, embeddings=np.eye(8, 4, dtype=np.float32))
    assert report["tokenizer"] == "char:2-2"
    text = (run / "clusters.md").read_text(encoding="utf-8")
    assert "character 2-grams within words" in text and "足球" in text
    assert "purity" not in text.lower()
