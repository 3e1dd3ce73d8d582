"""Each text embedded once: the evaluation embedding cache and the in-run per-step cache."""
from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import torch

from evaluation.model_io.embedding_cache import EmbeddingCache, weights_fingerprint
from tests.helpers.speed import CHUNKS, LOADER
from textcore.encoding.encoder import EncoderSettings, TextEncoder

TEXTS = ["a first text", "second one here", "a first text", "the third and longest text of all", "second one here"]


def test_each_distinct_text_is_embedded_once_and_values_match_the_encoder():
    encoder = TextEncoder.from_name("tiny", EncoderSettings.outside_training())
    cache = EmbeddingCache(encoder, batch_size=2)
    out = cache.encode(TEXTS, "mean")
    assert out.shape == (5, encoder.dim) and out.dtype == np.float32
    assert cache.encoded_texts == 3  # duplicates inside the list are embedded once
    direct = encoder.encode(TEXTS, pooling="mean").numpy()
    assert np.allclose(out, direct, atol=1e-5)
    again = cache.encode(list(reversed(TEXTS)), "mean")
    assert cache.encoded_texts == 3  # a second task group with the same texts costs nothing
    assert np.allclose(again, out[::-1], atol=0)
    encoder.max_length = 4  # another token limit is another key: the truncated text has another embedding
    short = cache.encode(TEXTS[:2], "mean")
    assert cache.encoded_texts == 5 and not np.allclose(short[1], out[1])
    cache.encode(TEXTS[:2], "cls_before_pooler")  # so is another pooling
    assert cache.encoded_texts == 7


def test_disk_cache_is_reused_only_for_the_same_weights(tmp_path):
    encoder = TextEncoder.from_name("tiny", EncoderSettings.outside_training())
    first = EmbeddingCache(encoder, tmp_path).encode(TEXTS, "mean")
    reread = EmbeddingCache(encoder, tmp_path)
    assert np.array_equal(reread.encode(TEXTS, "mean"), first) and reread.encoded_texts == 0
    with torch.no_grad():
        next(encoder.backbone.parameters()).add_(0.5)  # a trained model: another fingerprint
    changed = EmbeddingCache(encoder, tmp_path)
    assert changed.fingerprint != reread.fingerprint
    assert not np.allclose(changed.encode(TEXTS, "mean"), first) and changed.encoded_texts == 3


def test_fingerprint_depends_on_every_weight():
    a, b = (TextEncoder.from_name("tiny", EncoderSettings.outside_training()) for _ in range(2))
    assert weights_fingerprint(a) == weights_fingerprint(b)
    with torch.no_grad():
        list(b.parameters())[-1][0] += 1e-3
    assert weights_fingerprint(a) != weights_fingerprint(b)


def test_in_run_callbacks_share_one_encoder_pass_per_step(toy_corpus, monkeypatch):
    """Evaluator, centroid init, stage switch and report ask at the same step (even across an epoch
    boundary, where Lightning counts the next epoch): one pass; the next step: a new pass."""
    import lightning_modules.shared.eval_outputs as eval_outputs
    from datamodules.short_text import ShortTextDataModule
    from lightning_modules.sccl.module import SCCL

    dm = ShortTextDataModule(data_dir=str(toy_corpus.parent), file=toy_corpus.name, text_column="text0",
                             aug_columns=["text1"], num_clusters=3, tokenizer="tiny", batch_size=8, seed=0,
                             loader=LOADER)
    module = SCCL(num_clusters=3, backbone="tiny", chunk_tokens=CHUNKS)
    passes = []
    real = eval_outputs.collect_eval_outputs
    monkeypatch.setattr(eval_outputs, "collect_eval_outputs",
                        lambda m, loader, spill_dir=None, strategy=None, embedder=None:
                        passes.append(1) or real(m, loader, spill_dir, strategy, embedder))
    trainer = SimpleNamespace(global_step=10, current_epoch=0, datamodule=dm)
    first = eval_outputs.cached_eval_outputs(trainer, module)
    trainer.current_epoch = 1  # the same weights seen from the next epoch's start
    assert eval_outputs.cached_eval_outputs(trainer, module) is first and len(passes) == 1
    trainer.global_step = 11
    eval_outputs.cached_eval_outputs(trainer, module)
    assert len(passes) == 2
    assert first["embeddings"].shape == (len(dm.texts), module.encoder.dim)
