"""Embed each text once per model: an in-memory (and optionally on-disk) cache of evaluation embeddings.

Keys: the model (a fingerprint of its weights, so a changed checkpoint never reuses stale
vectors), the pooling, the token limit and the text. Within one process a text seen again
(a repeated sentence, the same dataset in two task groups, duplicates inside a dataset) is
not embedded again. With ``directory`` set, every list of texts embedded is also stored as
``<directory>/<fingerprint>/<pooling>_<max_length>_<digest of the list>.npy``, so a later run
of ``evaluation.benchmarks.evaluate_model`` on the same model (other KMeans seeds or backend, another
task group) reads it instead of running the encoder.
"""
from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Sequence

import numpy as np
import torch


def weights_fingerprint(module: torch.nn.Module) -> str:
    """A 32-hex-digit digest of every tensor of ``module.state_dict()`` (names, dtypes, shapes, bytes)."""
    digest = hashlib.blake2b(digest_size=16)
    for name, tensor in module.state_dict().items():
        value = tensor.detach().cpu().contiguous()
        digest.update(f"{name}|{value.dtype}|{tuple(value.shape)}".encode())
        digest.update(value.reshape(-1).view(torch.uint8).numpy().tobytes())
    return digest.hexdigest()


def texts_digest(texts: Sequence[str]) -> str:
    digest = hashlib.blake2b(digest_size=16)
    for text in texts:
        digest.update(text.encode("utf-8", "surrogatepass"))
        digest.update(b"\0")
    return digest.hexdigest()


class EmbeddingCache:
    """Embeddings [n, d] (float32) of texts for one ``TextEncoder``, each distinct text embedded once.

    Args:
        encoder: a ``textcore.encoding.encoder.TextEncoder``; its ``max_length`` at call time is part
            of the key (evaluation changes it per task).
        directory: where to keep embeddings between runs (None: memory only).
        batch_size: texts per encoder batch (``TextEncoder.encode``; batches are length-sorted).
        embedder: what embeds the texts in place of ``encoder`` (an ONNX Runtime export of it:
            ``textcore.encoding.onnx_runtime``); its backend and the hash of its recipe are part of the key.
    """

    def __init__(self, encoder, directory: str | Path | None = None, batch_size: int = 128, embedder=None):
        self.encoder = encoder
        self.embedder = embedder if embedder is not None else encoder
        self.directory = Path(directory) if directory else None
        self.batch_size = batch_size
        self.fingerprint = weights_fingerprint(encoder)
        backend = getattr(embedder, "backend", None)
        if backend is not None:  # another backend's embeddings differ in rounding: never read for torch's
            self.fingerprint += f"-{backend}"
            recipe = getattr(embedder, "recipe", None)  # an int8 export made another way embeds otherwise
            self.fingerprint += f"-{recipe}" if recipe else ""
        self._memory: dict[tuple[str, int], dict[str, np.ndarray]] = {}
        self.encoded_texts = 0  # texts that went through the encoder (the rest came from the cache)

    def encode(self, texts: Sequence[str], pooling: str | None = None) -> np.ndarray:
        texts = list(texts)
        pooling = pooling or self.encoder.pooling
        key = (pooling, int(self.encoder.max_length))
        store = self._memory.setdefault(key, {})
        path = self._path(key, texts)
        if path is not None and path.is_file():
            saved = np.load(path)
            if saved.shape[0] == len(texts):
                store.update(zip(texts, saved))
                return saved
        missing = [t for t in dict.fromkeys(texts) if t not in store]
        if missing:
            embedded = self.embedder.encode(missing, batch_size=self.batch_size, pooling=pooling).numpy()
            store.update(zip(missing, embedded.astype(np.float32, copy=False)))
            self.encoded_texts += len(missing)
        out = np.stack([store[t] for t in texts]) if texts else np.zeros((0, self.encoder.dim), np.float32)
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
            np.save(path, out)
        return out

    def _path(self, key: tuple[str, int], texts: list[str]) -> Path | None:
        if self.directory is None:
            return None
        pooling, max_length = key
        return self.directory / self.fingerprint / f"{pooling}_{max_length}_{texts_digest(texts)}.npy"
