"""Class-based TF-IDF (c-TF-IDF, as BERTopic defines it): the words that tell one cluster from the others.

All texts of a class (here: a cluster) are treated as one document. For a term t and class c,

    W(t, c) = tf(t, c) · log(1 + A / f_t)

with tf(t, c) the frequency of t in class c divided by the number of words of c (row-wise L1
normalisation of the class-by-term count matrix), f_t the frequency of t summed over all classes,
and A the average number of words per class. Words frequent everywhere get a small idf; words
frequent in one class and rare elsewhere come first. (BERTopic's ``ClassTfidfTransformer`` with
``bm25_weighting=False, reduce_frequent_words=False``; written here, not imported.)
"""
from __future__ import annotations

from typing import Sequence

import numpy as np


def class_term_counts(docs: Sequence[str], classes: Sequence[int], num_classes: int | None = None,
                      stop_words: str | None = "english") -> tuple[np.ndarray, list[str]]:
    """Class-by-term count matrix [C, V] and the vocabulary (scikit-learn's CountVectorizer, lowercased,
    tokens of 2+ word characters, English stop words removed). Classes are 0..C-1; a class with no
    text (an empty cluster) keeps a row of zeros. A corpus without any word gives V = 0."""
    from scipy import sparse
    from sklearn.feature_extraction.text import CountVectorizer

    classes = np.asarray(classes, dtype=np.int64)
    if len(docs) != len(classes):
        raise ValueError(f"{len(docs)} texts but {len(classes)} class assignments")
    size = int(num_classes if num_classes is not None else (classes.max() + 1 if len(classes) else 0))
    vectorizer = CountVectorizer(stop_words=stop_words)
    try:
        per_text = vectorizer.fit_transform(docs)  # [N, V] sparse
    except ValueError:  # "empty vocabulary": only stop words, numbers of one digit, punctuation
        return np.zeros((size, 0)), []
    indicator = sparse.csr_matrix(
        (np.ones(len(docs)), (classes, np.arange(len(docs)))), shape=(size, len(docs))
    )  # [C, N] one-hot of each text's class
    counts = (indicator @ per_text).toarray()  # [C, V]
    return counts, vectorizer.get_feature_names_out().tolist()


def ctfidf_weights(counts: np.ndarray) -> np.ndarray:
    """c-TF-IDF weights [C, V] of a class-by-term count matrix (module docstring)."""
    counts = np.asarray(counts, dtype=np.float64)
    if counts.size == 0:
        return counts
    words_per_class = counts.sum(axis=1, keepdims=True)  # [C, 1]
    tf = np.divide(counts, words_per_class, out=np.zeros_like(counts), where=words_per_class > 0)  # [C, V]
    term_frequency = counts.sum(axis=0)  # [V] f_t
    average_words = counts.sum() / counts.shape[0]  # A
    idf = np.log(1.0 + average_words / np.maximum(term_frequency, 1e-12))  # [V]
    return tf * idf


def top_words(docs: Sequence[str], classes: Sequence[int], num_classes: int | None = None, top_n: int = 10,
              stop_words: str | None = "english") -> list[list[tuple[str, float]]]:
    """For each class 0..C-1, up to ``top_n`` (word, c-TF-IDF weight) pairs, highest first (ties: alphabetical).

    Only words that occur in the class are listed, so a small or empty class gets fewer (or none).
    """
    counts, vocabulary = class_term_counts(docs, classes, num_classes, stop_words)
    weights = ctfidf_weights(counts)
    result = []
    for row in range(counts.shape[0]):
        present = np.flatnonzero(counts[row] > 0)
        ranked = sorted(present, key=lambda j: (-weights[row, j], vocabulary[j]))[:top_n]
        result.append([(vocabulary[j], float(weights[row, j])) for j in ranked])
    return result
