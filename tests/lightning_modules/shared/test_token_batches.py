"""Tokenising through the Rust tokenizer directly (the fast path of every collator and evaluation pass) gives what
the transformers wrapper gives; token counts come in blocks."""
from __future__ import annotations

import pytest
import torch

import textcore.encoding.token_batches as token_batches
from textcore.encoding.backbone import load_tokenizer
from textcore.encoding.token_batches import token_lengths, tokenize_batch, with_token_counts

TEXTS = ["", "   ", "hello world", "Ünïcödé façade naïve café", "a " * 100, "def f(x): return x**2  # code?",
         "中文 文本 测试", "tab\tsep\nnewline", "x", "COVID-19 vaccines: 95% effective?!", "[MASK] [SEP] tokens"]


@pytest.fixture(scope="module")
def tokenizer():
    return load_tokenizer("tiny")  # MiniLM's WordPiece tokenizer


@pytest.mark.parametrize("pad_to_max", [False, True])
def test_the_direct_path_equals_the_wrapper(tokenizer, pad_to_max):
    assert token_batches._direct(tokenizer) is not None  # the fast path is the one tested
    expected = with_token_counts(tokenizer(TEXTS, padding="max_length" if pad_to_max else "longest", truncation=True,
                                           max_length=16, return_tensors="pt"))
    got = tokenize_batch(tokenizer, TEXTS, 16, pad_to_max)
    assert set(got) == set(expected)
    for key, value in expected.items():
        if isinstance(value, torch.Tensor):
            assert got[key].dtype == value.dtype and torch.equal(got[key], value), key
        else:
            assert got[key] == value, key


def test_the_wrapper_settings_and_the_direct_path_do_not_meet(tokenizer):
    """The wrapper changes its Rust tokenizer's padding and truncation at every call; the direct path has its own."""
    tokenizer(TEXTS, padding="max_length", truncation=True, max_length=30)
    first = tokenize_batch(tokenizer, TEXTS, 8)
    tokenizer(TEXTS, padding="longest", truncation=True, max_length=4)
    assert torch.equal(tokenize_batch(tokenizer, TEXTS, 8)["input_ids"], first["input_ids"])
    assert first["input_ids"].shape == (len(TEXTS), 8)
    plain = tokenizer(TEXTS, truncation=True, max_length=30)["input_ids"]  # no padding left on by the direct path
    assert [len(ids) for ids in plain] == token_lengths(tokenizer, TEXTS, 30).tolist()


def test_token_counts_in_blocks_equal_the_wrapper_and_the_plain_path(tokenizer, monkeypatch):
    expected = [len(ids) for ids in tokenizer(TEXTS, truncation=True, max_length=12)["input_ids"]]
    assert token_lengths(tokenizer, TEXTS, 12, block=3).tolist() == expected
    monkeypatch.setattr(token_batches, "_direct", lambda tokenizer: None)  # a tokenizer without the direct path
    assert token_lengths(tokenizer, TEXTS, 12, block=4).tolist() == expected
    assert torch.equal(tokenize_batch(tokenizer, TEXTS, 12)["input_ids"],
                       tokenizer(TEXTS, padding="longest", truncation=True, max_length=12,
                                 return_tensors="pt")["input_ids"])
