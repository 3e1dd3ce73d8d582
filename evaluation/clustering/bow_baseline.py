"""The bag-of-words rows of SCCL's and AECL's tables: KMeans on BoW counts or TF-IDF vectors of each dataset.

    python tools.py evaluate --model tfidf --tasks clustering
    python tools.py evaluate --model bow --tasks clustering

The vectoriser is fitted on the texts of the dataset being clustered (lowercased words of 2+
characters, English stop words removed; TF-IDF with scikit-learn's smoothed idf and L2-normalised
rows), and scikit-learn's KMeans clusters the sparse vectors with the same seeds and restarts as
the embedding protocol (``evaluation.clustering.metrics.sparse_kmeans_scores``). No model, no training: the
floor every method's table starts from.
"""
from __future__ import annotations

from typing import Sequence

BASELINES = ("tfidf", "bow")
DESCRIPTIONS = {
    "tfidf": "TF-IDF vectors of each dataset's texts (scikit-learn TfidfVectorizer, English stop words removed)",
    "bow": "word counts of each dataset's texts (scikit-learn CountVectorizer, English stop words removed)",
}


def features(kind: str):
    """``encode``-like function: texts -> a sparse [n, V] matrix, the vocabulary fitted on those texts."""
    from sklearn.feature_extraction.text import CountVectorizer, TfidfVectorizer

    if kind not in BASELINES:
        raise ValueError(f"unknown baseline {kind!r}; one of {BASELINES}")

    def encode(texts: Sequence[str]):
        vectorizer = TfidfVectorizer(stop_words="english") if kind == "tfidf" else CountVectorizer(stop_words="english")
        return vectorizer.fit_transform(list(texts)).astype("float64")

    return encode
