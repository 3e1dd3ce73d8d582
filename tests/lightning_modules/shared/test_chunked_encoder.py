"""Length-sorted chunked encoder forward: same embeddings, losses and gradients as one
padded call, independent dropout per text, deterministic for a seed."""
from __future__ import annotations

import itertools

import pytest
import torch

from tests.helpers.speed import CHUNKS
from textcore.encoding.encoder import EncoderSettings, TextEncoder
from textcore.encoding.token_batches import length_chunks

TEXTS = [
    "short",
    "a somewhat longer text about python lists",
    "mid length title here",
    "x",
    "the longest text of this little batch by a clear margin of several words",
    "how do i sort a dictionary by value",
    "numpy array",
    "why does my regex not match the newline at the end of a line",
]
ATOL = 1e-5


def make_encoder(pooling: str = "mean", chunk_tokens: int = 0) -> TextEncoder:
    settings = EncoderSettings(pooling, 32, chunk_tokens, concat_views=True, grad_cache_tokens=0, prompt_templates=None)
    return TextEncoder.from_name("tiny", settings)


# -- the chunk planner ---------------------------------------------------------------------------------
def test_length_chunks_cover_every_row_once_within_the_budget():
    lengths = [5, 32, 7, 7, 12, 3, 30, 9, 18, 4]
    chunks = length_chunks(lengths, 40)
    flat = [i for rows in chunks for i in rows]
    assert sorted(flat) == list(range(len(lengths)))
    assert [lengths[i] for i in flat] == sorted(lengths)  # sorted by token count
    for rows in chunks:
        assert len(rows) == 1 or len(rows) * max(lengths[i] for i in rows) <= 40
    assert len(chunks) > 1


def test_length_chunks_zero_budget_is_one_chunk_in_batch_order_and_a_long_row_gets_its_own():
    assert length_chunks([9, 2, 5], 0) == [[0, 1, 2]]
    assert length_chunks([50, 2], 10) == [[1], [0]]  # a row longer than the budget still goes through


# -- equality with one padded call -------------------------------------------------------------------
@pytest.mark.parametrize("pooling", ["mean", "cls", "cls_before_pooler"])
@pytest.mark.parametrize("pad_to_max", [False, True])
def test_chunked_embeddings_equal_unchunked(pooling, pad_to_max):
    encoder = make_encoder(pooling).eval()
    tokens = encoder.tokenize(TEXTS, pad_to_max=pad_to_max)
    with torch.no_grad():
        dense = encoder(**tokens)  # [B, d]
        for budget in (1, 16, 40, 10_000):
            encoder.chunk_tokens = budget
            chunked = encoder(**tokens)
            assert chunked.shape == dense.shape
            assert torch.allclose(chunked, dense, atol=ATOL), (budget, (chunked - dense).abs().max())
            encoder.chunk_tokens = 0


def test_left_padded_batches_are_not_cut():
    encoder = make_encoder().eval()
    tokens = encoder.tokenize(TEXTS[:3])
    flipped = {k: v.flip(1) for k, v in tokens.items()}  # padding on the left
    with torch.no_grad():
        dense = encoder(**flipped)
        encoder.chunk_tokens = 8
        assert torch.equal(encoder(**flipped), dense)


def test_concatenated_views_equal_one_call_per_view():
    encoder = make_encoder(chunk_tokens=24).eval()
    views = [encoder.tokenize(TEXTS[:4]), encoder.tokenize(TEXTS[4:]), encoder.tokenize(TEXTS[2:6], pad_to_max=True)]
    assert len({v["input_ids"].shape[1] for v in views}) > 1  # different widths are padded to a common one
    with torch.no_grad():
        together = encoder.forward_views(views)
        encoder.concat_views = False
        apart = encoder.forward_views(views)
        encoder.chunk_tokens = 0
        reference = [encoder(**v) for v in views]
    for a, b, c in zip(together, apart, reference):
        assert a.shape == c.shape
        assert torch.allclose(a, c, atol=ATOL) and torch.allclose(b, c, atol=ATOL)


# -- losses and gradients of every method, dropout off ------------------------------------------------------
def _short_text_batch(module, n_views: int) -> dict:
    tok = module.encoder.tokenize
    batch = {"index": torch.arange(len(TEXTS)), "view1": tok(TEXTS), "view2": tok(TEXTS[::-1])}
    if n_views == 3:
        batch["original"] = tok([t.upper() for t in TEXTS])
    return batch


def _sccl():
    from lightning_modules.sccl.module import SCCL

    module = SCCL(num_clusters=3, backbone="tiny", chunk_tokens=CHUNKS)
    module.set_centroids(torch.randn(3, module.encoder.dim, generator=torch.Generator().manual_seed(1)))
    return module, _short_text_batch(module, 3)


def _aecl():
    from lightning_modules.aecl.module import AECL

    module = AECL(num_clusters=3, backbone="tiny", chunk_tokens=CHUNKS)
    return module, _short_text_batch(module, 2)


def _pairsupcon():
    from lightning_modules.pairsupcon.module import PairSupCon

    module = PairSupCon(backbone="tiny", chunk_tokens=CHUNKS)
    tok = module.encoder.tokenize
    return module, {"s1": tok(TEXTS), "s2": tok(TEXTS[1:] + TEXTS[:1]), "labels": torch.tensor([1, 0] * 4)}


def _simcse():
    from lightning_modules.simcse.module import SimCSE

    module = SimCSE(backbone="tiny", chunk_tokens=CHUNKS)
    return module, {"index": torch.arange(len(TEXTS)), "original": module.encoder.tokenize(TEXTS)}


def _clusterns():
    from lightning_modules.clusterns.module import ClusterNS

    module = ClusterNS(num_clusters=2, backbone="tiny", chunk_tokens=CHUNKS)
    return module, {"index": torch.arange(len(TEXTS)), "original": module.encoder.tokenize(TEXTS)}


METHODS = {"sccl": _sccl, "aecl": _aecl, "pairsupcon": _pairsupcon, "simcse": _simcse, "clusterns": _clusterns}


def gradient_difference(reference: dict, other: dict) -> float:
    """Largest |difference| of a gradient entry relative to the largest |entry| of its tensor, where
    tensors whose gradient is zero in exact arithmetic (e.g. attention key biases: the softmax ignores
    a constant added to every key) count against 1e-3 of the largest gradient of the model."""
    floor = 1e-3 * max(float(g.abs().max()) for g in reference.values())
    return max(float((other[n] - g).abs().max()) / max(float(g.abs().max()), floor) for n, g in reference.items())


def _loss_and_grads(module, batch, chunk_tokens: int, concat_views: bool):
    module.encoder.chunk_tokens = chunk_tokens
    module.encoder.concat_views = concat_views
    module.zero_grad()
    loss = module.training_step(batch, 0)
    loss.backward()
    grads = {n: p.grad.clone() for n, p in module.named_parameters() if p.grad is not None}
    return loss.detach(), grads


@pytest.mark.parametrize("method", sorted(METHODS))
def test_chunked_training_step_gives_the_same_loss_and_gradients(method):
    """In float64, so that the comparison sees the chunking and not float32 rounding: with dropout
    off SimCSE's two views are identical and its gradient is a difference of nearly equal terms,
    where merely permuting the batch moves float32 gradients by ~5e-4 relative."""
    torch.manual_seed(0)
    module, batch = METHODS[method]()
    module.log = lambda *args, **kwargs: None
    module.double().eval()  # dropout off: the comparison is about the forward, not about the masks
    loss, grads = _loss_and_grads(module, batch, chunk_tokens=0, concat_views=False)
    assert len(grads) > 5
    for chunk_tokens, concat in itertools.product((12, 64), (True, False)):
        other_loss, other_grads = _loss_and_grads(module, batch, chunk_tokens, concat)
        assert abs(float(other_loss - loss)) < 1e-10, (chunk_tokens, concat, other_loss, loss)
        assert other_grads.keys() == grads.keys()
        assert gradient_difference(grads, other_grads) < 1e-8, (chunk_tokens, concat)


# -- dropout on ---------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("chunk_tokens", [0, 10, 40])
def test_with_dropout_every_copy_of_a_text_gets_its_own_mask(chunk_tokens):
    encoder = make_encoder(chunk_tokens=chunk_tokens).train()
    texts = ["the same text"] * 6 + ["another text that is a bit longer"] * 2
    tokens = encoder.tokenize(texts)
    if chunk_tokens:
        lengths = tokens["attention_mask"].sum(1).tolist()
        assert len(length_chunks(lengths, chunk_tokens)) > 1  # the copies are spread over several chunks
    torch.manual_seed(0)
    with torch.no_grad():
        out = encoder(**tokens)  # [8, d]
    for i, j in itertools.combinations(range(len(texts)), 2):
        assert not torch.allclose(out[i], out[j], atol=1e-6), (i, j)


def test_dropout_masks_differ_between_views_and_the_chunked_forward_is_deterministic():
    encoder = make_encoder(chunk_tokens=16).train()
    views = [encoder.tokenize(TEXTS), encoder.tokenize(TEXTS)]

    def run():
        torch.manual_seed(123)
        with torch.no_grad():
            return encoder.forward_views(views)

    first, second = run()
    assert not torch.allclose(first, second, atol=1e-6)  # the same texts in two views: two masks
    again = run()
    assert torch.equal(again[0], first) and torch.equal(again[1], second)  # same seed, same result
