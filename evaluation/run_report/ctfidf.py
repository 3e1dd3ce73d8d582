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

import re
import unicodedata
from typing import Sequence

import numpy as np

from textcore.errors import ConfigError

TOKENIZERS = "auto | word | char:A-B (character n-grams, e.g. char:2-2) | backbone"
# scripts written without spaces between words: their "words" are character n-grams
_NO_SPACE_SCRIPTS = ("CJK", "HIRAGANA", "KATAKANA", "HANGUL", "THAI", "LAO", "KHMER", "MYANMAR", "TIBETAN")


def no_space_share(docs: Sequence[str], limit: int = 2000) -> float:
    """Share of the letters of (the first ``limit``) texts that belong to scripts written without spaces."""
    letters = no_space = 0
    for text in docs[:limit]:
        for ch in str(text):
            if ch.isalpha():
                letters += 1
                no_space += unicodedata.name(ch, "").startswith(_NO_SPACE_SCRIPTS)
    return no_space / letters if letters else 0.0


def resolve_tokenizer(tokenizer: str, docs: Sequence[str]) -> str:
    """``auto`` -> ``char:2-2`` when most letters are in scripts without spaces (Chinese, Japanese, Thai, ...),
    else ``word``; any other setting is checked and returned."""
    setting = str(tokenizer).strip().lower()
    if setting == "auto":
        return "char:2-2" if no_space_share(docs) > 0.3 else "word"
    if setting in ("word", "backbone") or re.fullmatch(r"char:\d+-\d+", setting):
        if setting.startswith("char:"):
            lo, hi = (int(x) for x in setting[5:].split("-"))
            if not 1 <= lo <= hi:
                raise ConfigError(f"c-TF-IDF tokenizer '{tokenizer}': char:A-B needs 1 <= A <= B")
        return setting
    raise ConfigError(f"c-TF-IDF tokenizer '{tokenizer}': use {TOKENIZERS}")


def _backbone_analyzer(name: str):
    from textcore.encoding.backbone import load_tokenizer

    tok = load_tokenizer(name)

    def analyze(text: str) -> list[str]:
        # subword pieces without their continuation marks; pieces without a letter or digit are dropped
        pieces = (p.replace("##", "").lstrip("\u0120\u2581") for p in tok.tokenize(str(text).lower()))
        return [p for p in pieces if re.search(r"\w", p)]

    return analyze


def vectorizer_for(tokenizer: str, docs: Sequence[str], stop_words: str | None = "english",
                   backbone: str | None = None):
    """A CountVectorizer for the c-TF-IDF tokenizer setting (``TOKENIZERS``) and the texts it will see.

    ``word``: scikit-learn's default tokens (2+ word characters) with ``stop_words``; ``char:A-B``:
    character n-grams of A..B characters within words (``char_wb``), no stop words; ``backbone``: the
    pieces of the backbone's tokenizer (``backbone``: its name), no stop words.
    """
    from sklearn.feature_extraction.text import CountVectorizer

    kind = resolve_tokenizer(tokenizer, docs)
    if kind == "word":
        return CountVectorizer(stop_words=stop_words)
    if kind.startswith("char:"):
        lo, hi = (int(x) for x in kind[5:].split("-"))
        # char_wb pads words with spaces; n-grams that are (partly) spaces carry no meaning here
        base = CountVectorizer(analyzer="char_wb", ngram_range=(lo, hi))
        analyze = base.build_analyzer()

        def grams(text: str) -> list[str]:
            return [g for g in analyze(text) if g.strip() == g and re.search(r"\w", g)]

        return CountVectorizer(analyzer=grams)
    if not backbone:
        raise ConfigError("c-TF-IDF tokenizer 'backbone' needs the backbone's name (a run's dataset.tokenizer)")
    return CountVectorizer(analyzer=_backbone_analyzer(backbone))


def class_term_counts(docs: Sequence[str], classes: Sequence[int], num_classes: int | None = None,
                      stop_words: str | None = "english", tokenizer: str = "word",
                      backbone: str | None = None) -> tuple[np.ndarray, list[str]]:
    """Class-by-term count matrix [C, V] and the vocabulary (scikit-learn's CountVectorizer, lowercased;
    terms from ``tokenizer``, see ``vectorizer_for``). Classes are 0..C-1; a class with no
    text (an empty cluster) keeps a row of zeros. A corpus without any term gives V = 0."""
    from scipy import sparse

    classes = np.asarray(classes, dtype=np.int64)
    if len(docs) != len(classes):
        raise ValueError(f"{len(docs)} texts but {len(classes)} class assignments")
    size = int(num_classes if num_classes is not None else (classes.max() + 1 if len(classes) else 0))
    vectorizer = vectorizer_for(tokenizer, docs, stop_words, backbone)
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
              stop_words: str | None = "english", tokenizer: str = "word",
              backbone: str | None = None) -> list[list[tuple[str, float]]]:
    """For each class 0..C-1, up to ``top_n`` (term, c-TF-IDF weight) pairs, highest first (ties: alphabetical).

    Only terms that occur in the class are listed, so a small or empty class gets fewer (or none).
    ``tokenizer``/``backbone``: what a term is (``vectorizer_for``).
    """
    counts, vocabulary = class_term_counts(docs, classes, num_classes, stop_words, tokenizer, backbone)
    weights = ctfidf_weights(counts)
    result = []
    for row in range(counts.shape[0]):
        present = np.flatnonzero(counts[row] > 0)
        ranked = sorted(present, key=lambda j: (-weights[row, j], vocabulary[j]))[:top_n]
        result.append([(vocabulary[j], float(weights[row, j])) for j in ranked])
    return result
