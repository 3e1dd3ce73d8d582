"""Assign new texts to the clusters of a trained run.

    python tools.py predict --run <run folder | .ckpt | sentence-transformers export> \\
        --input new.csv --text-column text --output assigned.csv

The texts are embedded with the run's trained encoder (its evaluation pooling and max_length), then

- methods with a cluster head (``--assign head``, the default when there is one): SCCL's Student-t
  assignment to its centroids, AECL's clustering network. ``confidence`` is the head's probability of
  the chosen cluster, ``margin`` its lead over the second most probable one;
- otherwise (``--assign kmeans``; SimCSE, ClusterNS, PairSupCon, Instance-CL-only runs, and
  sentence-transformers exports): the nearest of the KMeans centroids fitted at the end of training
  (``kmeans_centroids.npy`` in the run folder, copied beside an export by ``evaluation.model_io.export``), by
  Euclidean distance as KMeans assigns. ``confidence`` is the cosine similarity to that centroid,
  ``margin`` = 1 - d1/d2 (d1, d2: distances to the nearest and second-nearest centroid; 0 = halfway
  between two clusters, near 1 = deep inside one).

AECL's clustering network reads H, the output of a sample-level attention over the samples of a
BATCH, so a text's cluster depends on which texts share its batch. Here every new text is placed in
a batch of its own with the same fixed context: ``--context-size`` texts of the run's training set
(default: the run's training batch size - 1), drawn with ``--seed``. The new texts never see each
other, so a text gets the same cluster whatever else is in the file and whatever the file's order.

Output: the input's row number (0-based data row), the text, ``cluster``, ``confidence``, ``margin``,
``assigned_by`` (head | kmeans) and ``top_words`` (the cluster's c-TF-IDF words from the run's
``clusters.json``). Rows without text are kept with empty cluster cells and reported in one warning.
"""
from __future__ import annotations

import argparse
import csv
import json
import logging
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Sequence

import numpy as np

from evaluation.model_io import run_files
from textcore import run_folder
from textcore.errors import MissingFileError, UserError, exit_on_user_error, writing

if TYPE_CHECKING:  # torch is imported where a model runs: `tools.py predict --help` needs none of it
    import torch

log = logging.getLogger(__name__)

ASSIGNERS = ("auto", "head", "kmeans")


class PredictInputError(UserError, ValueError):
    """A prediction input, model reference or option that cannot be used; the message says how to fix it."""


# -- assignment maths (pure functions on tensors) -------------------------------------------------------------
def nearest_centroid(embeddings: np.ndarray, centroids: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(cluster [N], cosine to its centroid [N], margin 1 - d1/d2 [N]) for [N, d] embeddings and [K, d]
    centroids; the cluster is the Euclidean-nearest centroid (KMeans's rule)."""
    x = np.asarray(embeddings, dtype=np.float64)
    c = np.asarray(centroids, dtype=np.float64)
    sq = (x**2).sum(1, keepdims=True) - 2 * x @ c.T + (c**2).sum(1)  # [N, K]
    distances = np.sqrt(np.maximum(sq, 0.0))  # [N, K]
    cluster = distances.argmin(axis=1)  # [N]
    if c.shape[0] > 1:
        two = np.sort(distances, axis=1)[:, :2]  # [N, 2]
        margin = np.where(two[:, 1] > 0, 1.0 - two[:, 0] / np.maximum(two[:, 1], 1e-12), 0.0)
    else:
        margin = np.ones(len(x))
    chosen = c[cluster]  # [N, d]
    cosine = (x * chosen).sum(1) / np.maximum(np.linalg.norm(x, axis=1) * np.linalg.norm(chosen, axis=1), 1e-12)
    return cluster, cosine, margin


def probabilities_to_assignment(p: torch.Tensor) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(argmax [N], its probability [N], lead over the runner-up [N]) of row-stochastic [N, K] probabilities."""
    p = p.detach().float().cpu()
    top = p.topk(min(2, p.shape[1]), dim=1).values  # [N, 2]
    lead = top[:, 0] - top[:, 1] if p.shape[1] > 1 else top[:, 0]
    return p.argmax(dim=1).numpy(), top[:, 0].numpy(), lead.numpy()


# -- loading a model reference ------------------------------------------------------------------------------------
@dataclass
class ClusterModel:
    """What assigning new texts needs: an encoder, its pooling, and a head and/or centroids."""

    encoder: object
    pooling: str
    folder: Path  # where clusters.json / kmeans_centroids.npy are looked for
    module: object | None = None  # the LightningModule (head methods)
    centroids: np.ndarray | None = None
    batch_size: int | None = None  # the run's training batch size (AECL context)
    run_dir: Path | None = None

    @property
    def has_head(self) -> bool:
        """Whether the method assigns new texts with its own cluster head (the module says so)."""
        return self.module is not None and self.module.has_cluster_head()


def load_cluster_model(reference: str | Path) -> ClusterModel:
    """A run folder, one of its checkpoints, or a sentence-transformers folder written by
    ``evaluation.model_io.export``."""
    from evaluation.model_io.load import (
        ModelLoadError,
        load_run_module,
        load_sentence_transformers_folder,
        run_checkpoint,
    )

    path = Path(reference)
    if not path.exists():
        raise MissingFileError(f"--run '{path}' does not exist.")
    if path.is_dir() and (path / "modules.json").is_file():
        encoder, pooling = load_sentence_transformers_folder(path)
        folder = path if (path / run_files.CENTROIDS).is_file() else path.parent
        return ClusterModel(encoder, pooling, folder, centroids=_centroids(folder, path))
    if path.suffix == ".ckpt":
        ckpt = path
    elif path.is_dir():
        ckpt = run_checkpoint(path)
    else:
        raise PredictInputError(
            f"--run '{path}' is neither a run folder, a .ckpt nor a sentence-transformers folder (modules.json)."
        )
    module, cfg, run_dir = load_run_module(ckpt, key="--run")
    if module is None:
        raise ModelLoadError(
            f"'{ckpt}' is not inside its run folder (no {run_folder.CONFIG} beside {run_folder.CHECKPOINTS}/), so its "
            "clusters are unknown: pass the run folder it was written to."
        )
    centroids = _centroids(run_dir) if (run_dir / run_files.CENTROIDS).is_file() else None
    return ClusterModel(module.encoder, module.eval_pooling, run_dir, module, centroids,
                        int(cfg.get("batch_size") or 64), run_dir)


def _centroids(folder: Path, reference: Path | None = None) -> np.ndarray:
    path = folder / run_files.CENTROIDS
    if not path.is_file():
        raise PredictInputError(
            f"No {run_files.CENTROIDS} in '{reference or folder}' or beside it: export the model from a run that "
            "has them (`python tools.py export --run <run folder>` copies them), or pass the run folder."
        )
    return np.load(path).astype(np.float32)


# -- reading and writing ----------------------------------------------------------------------------------------
CHUNK_ROWS = 20_000  # rows read, embedded, assigned and written at a time: the memory does not grow with the file


def text_chunks(path: Path, text_column: str, encoding: str | None = None, chunk_rows: int | None = None):
    """(first row number, texts, blank mask) of each chunk of ``path`` (``datamodules.table_reader.iter_table``), the
    column checked in the first chunk; a missing column in a later chunk of a JSON Lines file is a blank."""
    from datamodules.table_reader import iter_table

    path = Path(path)
    if not path.is_file():
        raise MissingFileError(f"--input '{path}' does not exist" + (" (it is a folder)." if path.is_dir() else "."))
    start, any_text = 0, False
    for frame in iter_table(path, encoding, option="--encoding", chunk_rows=chunk_rows or CHUNK_ROWS):
        if len(frame) == 0:  # a header without rows
            continue
        if start == 0 and text_column not in frame.columns:
            raise PredictInputError(
                f"Column '{text_column}' (--text-column) is not in '{path}'; the file has columns "
                f"{list(frame.columns)}. Pass `--text-column <one of them>`."
            )
        values = frame[text_column] if text_column in frame.columns else frame.index.to_series().map(lambda _: None)
        blank = (values.isna() | (values.fillna("").astype(str).str.strip() == "")).to_numpy()
        any_text = any_text or not blank.all()
        yield start, values.fillna("").astype(str).tolist(), blank
        start += len(frame)
    if start == 0:
        raise PredictInputError(f"--input '{path}' has a header but no rows: add texts to it.")
    if not any_text:
        raise PredictInputError(f"--input '{path}': every row of column '{text_column}' is empty.")


def read_texts(path: Path, text_column: str, encoding: str | None = None) -> tuple[list[str], np.ndarray, list[int]]:
    """(texts, blank mask, file line of each row) of a whole file (:func:`text_chunks` joined; for small files)."""
    from datamodules.table_reader import file_lines

    texts, blanks = [], []
    for _, chunk, blank in text_chunks(path, text_column, encoding):
        texts += chunk
        blanks.append(blank)
    return texts, np.concatenate(blanks), file_lines(Path(path), encoding, len(texts))


def cluster_words(folder: Path, partition: str, top_n: int) -> dict[int, str]:
    """Cluster id -> its top words, comma-separated, from ``clusters.json`` (empty when there is none)."""
    path = folder / run_files.CLUSTERS_JSON
    if not path.is_file():
        warnings.warn(f"no {run_files.CLUSTERS_JSON} in '{folder}': the top_words column stays empty "
                      f"(write it with `python tools.py describe <run folder>`).", stacklevel=2)
        return {}
    clusters = json.loads(path.read_text(encoding="utf-8")).get("partitions", {}).get(partition, [])
    return {c["cluster"]: ", ".join(w for w, _ in c["top_words"][:top_n]) for c in clusters}


# -- the command ----------------------------------------------------------------------------------------------------
def predict(reference, input_path, text_column: str = "text", output=None, assign: str = "auto",
            encoding: str | None = None, batch_size: int = 128, context_size: int | None = None, seed: int = 0,
            top_n: int = 5) -> list[dict] | dict:
    """Assign the texts of ``input_path`` to the clusters of ``reference``.

    With ``output``: the rows are written to that CSV chunk by chunk (``CHUNK_ROWS`` at a time, so that a file of
    millions of texts takes the memory of one chunk), with progress lines, and the return is a summary (``rows``,
    ``assigned``, ``assigned_by``, ``per_cluster``). Without: the rows, as a list of dicts (small files)."""
    rows = _assigned_rows(reference, input_path, text_column, assign, encoding, batch_size, context_size, seed, top_n)
    if output is None:
        return [row for chunk in rows for row in chunk]
    return write_rows(Path(output), rows)


def _assigned_rows(reference, input_path, text_column, assign, encoding, batch_size, context_size, seed, top_n):
    """The output rows, one list per chunk of the input."""
    from textcore.console import PhaseProgress

    if assign not in ASSIGNERS:
        raise PredictInputError(f"--assign must be one of {ASSIGNERS}, got '{assign}'")
    if batch_size < 1 or top_n < 0 or (context_size is not None and context_size < 1):
        raise PredictInputError("--batch-size and --context-size must be >= 1, --top-words >= 0")
    chunks = text_chunks(Path(input_path), text_column, encoding)
    first = next(chunks)  # the file's problems before the model is loaded
    model = load_cluster_model(reference)
    has_head = model.has_head
    if assign == "head" and not has_head:
        raise PredictInputError(
            f"--assign head: '{reference}' has no cluster head (SCCL or AECL); use --assign kmeans."
        )
    use_head = has_head and assign != "kmeans"
    if not use_head and model.centroids is None:
        raise PredictInputError(
            f"'{reference}' has no cluster head and no {run_files.CENTROIDS}: it was trained without the "
            "prediction writer (dataset.callbacks.clustering_predictions) or is not a clustering run."
        )
    partition = "head" if use_head else "kmeans"
    words = cluster_words(model.folder, partition, top_n) if top_n else {}
    context = None
    if use_head and model.module.cluster_context:
        context = _context_embeddings(model, context_size, seed, batch_size)
    blank_rows: list[int] = []
    blanks = 0
    with PhaseProgress("assigning", _row_estimate(Path(input_path), first), "texts", logger=log,
                       estimated=True) as progress:
        for start, texts, blank in _chained(first, chunks):
            keep = np.flatnonzero(~blank)
            out = [{"row": start + i, text_column: texts[i], "cluster": "", "confidence": "", "margin": "",
                    "assigned_by": partition, "top_words": ""} for i in range(len(texts))]
            if len(keep):
                embeddings = model.encoder.encode([texts[i] for i in keep], batch_size=batch_size,
                                                  pooling=model.pooling)
                cluster, confidence, margin = _assign(model, embeddings, context, use_head)
                for j, i in enumerate(keep):
                    out[i].update(cluster=int(cluster[j]), confidence=round(float(confidence[j]), 6),
                                  margin=round(float(margin[j]), 6), top_words=words.get(int(cluster[j]), ""))
            blanks += int(blank.sum())
            if len(blank_rows) < 10:  # their file lines are looked up at the end, for the warning
                blank_rows += (start + np.flatnonzero(blank))[:10 - len(blank_rows)].tolist()
            progress.total = max(progress.total, start + len(texts))
            progress.advance(len(texts))
            yield out
    if blank_rows:
        from datamodules.table_reader import file_lines

        lines = file_lines(Path(input_path), encoding, progress.done)
        shown = [lines[i] for i in blank_rows]
        warnings.warn(f"{input_path}: {blanks} row(s) without text (file lines {shown}{', ...' if blanks > 10 else ''})"
                      " are written without a cluster.", stacklevel=2)


def _chained(first, rest):
    yield first
    yield from rest


def _row_estimate(path: Path, first) -> int:
    """The file's rows, guessed from its size and the first chunk's bytes (for the progress line's ETA)."""
    start, texts, _ = first
    if len(texts) < CHUNK_ROWS:
        return len(texts)
    sample = sum(len(t.encode("utf-8")) + 1 for t in texts) or 1
    return max(len(texts), int(len(texts) * path.stat().st_size / sample))


def _assign(model: ClusterModel, embeddings: torch.Tensor, context, use_head: bool):
    """(cluster, confidence, margin) of each row of ``embeddings``."""
    if use_head:
        import torch

        with torch.no_grad():
            p = model.module.cluster_probabilities(embeddings, context)  # [N, K]
        return probabilities_to_assignment(p)
    return nearest_centroid(embeddings.numpy(), model.centroids)


def _context_embeddings(model: ClusterModel, context_size, seed: int, batch_size: int) -> torch.Tensor:
    if model.run_dir is None:
        raise PredictInputError("AECL's head needs the run folder (its training texts form the attention context).")
    training = run_files.load_predictions(model.run_dir).texts
    size = min(context_size or max(model.batch_size - 1, 1), len(training))
    rows = np.sort(np.random.default_rng(seed).choice(len(training), size=size, replace=False))
    log.info("AECL head: each text attends to %d training texts (seed %d) and itself", size, seed)
    return model.encoder.encode([training[i] for i in rows], batch_size=batch_size, pooling=model.pooling)


def write_rows(path: Path, chunks) -> dict:
    """Write the rows of ``chunks`` (lists of row dicts) to ``path`` as they come; a summary of what was written.
    The file appears complete or not at all (written beside it, then renamed)."""
    from textcore.atomic_files import atomic_write

    summary = {"rows": 0, "assigned": 0, "assigned_by": None, "per_cluster": {}}

    def write(handle) -> None:
        writer = None
        for rows in chunks:
            if not rows:
                continue
            if writer is None:
                writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
                writer.writeheader()
                summary["assigned_by"] = rows[0]["assigned_by"]
            writer.writerows(rows)
            summary["rows"] += len(rows)
            for row in rows:
                if row["cluster"] != "":
                    summary["assigned"] += 1
                    summary["per_cluster"][row["cluster"]] = summary["per_cluster"].get(row["cluster"], 0) + 1

    path.parent.mkdir(parents=True, exist_ok=True)
    with writing(path):
        atomic_write(path, write, binary=False, newline="")
    summary["per_cluster"] = dict(sorted(summary["per_cluster"].items()))
    return summary


@exit_on_user_error
def main(argv: Sequence[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(prog="python tools.py predict", description=__doc__.split("\n")[0])
    parser.add_argument("--run", required=True, help="run folder, its .ckpt, or a sentence-transformers export")
    parser.add_argument("--input", required=True, type=Path, help="CSV/TSV of new texts (.tsv: tab-separated)")
    parser.add_argument("--text-column", default="text", help="column holding the texts (default: text)")
    parser.add_argument("--output", required=True, type=Path, help="CSV to write")
    parser.add_argument("--assign", default="auto", choices=ASSIGNERS,
                        help="head (SCCL/AECL), kmeans (saved centroids), auto: the head when there is one")
    parser.add_argument("--encoding", default=None, help="encoding of --input (default utf-8)")
    parser.add_argument("--batch-size", type=int, default=128, help="texts per encoder batch (default 128)")
    parser.add_argument("--context-size", type=int, default=None,
                        help="AECL: training texts each new text attends to (default: training batch size - 1)")
    parser.add_argument("--seed", type=int, default=0, help="AECL: draw of the context texts (default 0)")
    parser.add_argument("--top-words", type=int, default=5, help="top words per cluster in the output (default 5)")
    args = parser.parse_args(argv)
    summary = predict(args.run, args.input, args.text_column, args.output, args.assign, args.encoding,
                      args.batch_size, args.context_size, args.seed, args.top_words)
    print(f"wrote {args.output}: {summary['assigned']} texts assigned by {summary['assigned_by']}; "
          f"per cluster {summary['per_cluster']}")
    return summary


if __name__ == "__main__":
    from textcore import console

    console.run_cli(main, info_logs=True)
