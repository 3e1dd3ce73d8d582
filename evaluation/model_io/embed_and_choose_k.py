"""Choose the number of clusters K of a corpus without labels (docs/clusters.md, "Without labels").

    python tools.py choose-k --input texts.csv [--text-column text] [--model minilm] --k 2:60
    python tools.py choose-k --run logs/train/runs/<run>/<time> --k 2:60:2 --output choose_k/

The texts of ``--input`` are embedded once (``--embedding-cache`` keeps them on disk); a run folder (``--run``)
gives its end-of-run embeddings, ``embeddings/after.npy``, and embeds nothing. The scan over K (``--kmeans-runs``
KMeans runs per K), the recommendation under ``--rule`` and the files written (``choose_k.json``, ``choose_k.md``,
``choose_k.png`` in ``--output``) are
:mod:`evaluation.clustering.choose_k`'s. A label column, if the file has one, is never read.
"""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

from evaluation.clustering.choose_k import choose_k, parse_k, scan_rows, write_outputs
from evaluation.model_io import run_files
from textcore.errors import ConfigError, MissingFileError


def read_texts(path: Path, text_column: str, encoding: str | None = None) -> list[str]:
    """The non-empty texts of ``text_column`` of a file in any format the project reads."""
    from datamodules.table_reader import read_table

    table = read_table(path, encoding)
    if text_column not in table.columns:
        raise ConfigError(f"'{path}' has no column '{text_column}' (columns: {list(table.columns)}); "
                          "set --text-column.")
    texts = [t for t in table[text_column].dropna().astype(str) if t.strip()]
    if len(texts) < 3:
        raise ConfigError(f"'{path}': {len(texts)} non-empty texts in column '{text_column}'; K needs at least 3.")
    return texts


def saved_embeddings(run_dir: Path) -> np.ndarray:
    """The run's end-of-run embeddings, memory-mapped: the scan takes its sample's rows only."""
    embeddings = run_files.load_array(run_dir, run_files.EMBEDDINGS_AFTER)
    if embeddings is None:
        raise MissingFileError(f"'{run_dir}' has no {run_files.EMBEDDINGS_AFTER} (written by the end-of-run report); "
                               "give the data file with --input and the run with --model instead.")
    return embeddings


def embed_texts(texts: list[str], model: str, pooling: str | None, max_length: int | None, batch_size: int,
                cache_dir: Path | None, trust_checkpoint: bool = False) -> np.ndarray:
    from evaluation.model_io.embedding_cache import EmbeddingCache
    from evaluation.model_io.load import load_encoder

    encoder, pool = load_encoder(model, pooling, trust_checkpoint)
    if max_length is not None:
        limit = min(int(encoder.tokenizer.model_max_length), int(encoder.backbone.config.max_position_embeddings))
        if not 1 <= max_length <= limit:  # beyond the position embeddings the first long text stops the scan
            raise ConfigError(f"--max-length {max_length}: model '{model}' reads 1 to {limit} tokens; "
                              f"use e.g. --max-length 32 (the papers' clustering length).")
        encoder.max_length = max_length
    return EmbeddingCache(encoder, cache_dir, batch_size).encode(texts, pool)


def recommend_k(*, run, input, text_column, encoding, model, pooling, max_length, k, kmeans_runs, rule,
                silhouette_sample, max_texts, hdbscan_min_cluster_size, kmeans_backend, batch_size, embedding_cache,
                output, trust_checkpoint) -> dict:
    """``python tools.py choose-k`` (its options, ctclust.commands.choose_k): the embeddings of a run folder or of the
    texts of ``input``, the scan over ``k``, the recommended K printed and written to ``output``."""

    def log(message: str) -> None:
        print(message, file=sys.stderr, flush=True)

    if run is not None:
        if not run.is_dir():
            raise MissingFileError(f"--run '{run}' is not a folder (give a run folder, or a text file "
                                   "with --input).")
        embeddings, title = saved_embeddings(run), run.name
        parse_k(k, min(len(embeddings), max_texts or len(embeddings)))
        out = output or run / "choose_k"
    elif input.is_file():
        texts = read_texts(input, text_column, encoding)
        parse_k(k, min(len(texts), max_texts or len(texts)))  # before the (slow) embedding
        keep = scan_rows(len(texts), max_texts)
        if keep is not None:  # the scan's sample is all that is embedded
            texts = [texts[i] for i in keep]
        log(f"choose_k: embedding {len(texts)} texts of {input} with {model}")
        embeddings = embed_texts(texts, model, pooling, max_length, batch_size,
                                 embedding_cache, trust_checkpoint)
        title = f"{input.name} ({model})"
        out = output or Path("outputs") / "choose_k" / input.stem
    else:
        raise MissingFileError(f"--input '{input}' is not a file (a run folder goes with --run).")
    result = choose_k(embeddings, k, kmeans_runs, rule, silhouette_sample,
                      hdbscan_min_cluster_size, kmeans_backend=kmeans_backend, log=log,
                      max_texts=max_texts)
    paths = write_outputs(result, out, title)
    rec = result["recommended"]
    print(f"recommended K = {rec['k']} ({rec['rule_text']}); HDBSCAN: {result['hdbscan'].get('clusters')} clusters")
    print("wrote " + ", ".join(str(p) for p in paths))
    return result

