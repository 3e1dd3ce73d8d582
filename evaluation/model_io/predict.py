"""Assign new texts to the clusters of a trained run, on every device of one machine or several.

    python tools.py predict --run <run folder | .ckpt | sentence-transformers export> \\
        --input new.csv --text-column text --output assigned.csv [--devices 4] [--embeddings]

The texts are embedded with the run's trained encoder (its evaluation pooling and max_length), then

- methods with a cluster head (``--assign head``, the default when there is one): SCCL's Student-t
  assignment to its centroids, AECL's clustering network. ``confidence`` is the head's probability of
  the chosen cluster, ``margin`` its lead over the second most probable one;
- otherwise (``--assign kmeans``; SimCSE, ClusterNS, PairSupCon, Instance-CL-only runs, and
  sentence-transformers exports): the nearest of the KMeans centroids fitted at the end of training
  (``kmeans_centroids.npy`` in the run folder, copied beside an export by ``evaluation.model_io.export``), by
  Euclidean distance as KMeans assigns. ``confidence`` is the cosine similarity to that centroid,
  ``margin`` = 1 - d1/d2 (d1, d2: distances to the nearest and second-nearest centroid; 0 = halfway
  between two clusters, near 1 = deep inside one). A run that clustered in a UMAP (``cluster_space=umap``) places
  the text in its map first; when the map was refined (``umap.refine=linear``, the default) its linear classifier
  assigns the embedding instead (no UMAP placement): ``confidence`` is the classifier's probability of the cluster,
  ``margin`` its lead over the second most probable one.

AECL's clustering network reads H, the output of a sample-level attention over the samples of a
BATCH, so a text's cluster depends on which texts share its batch. Here every new text is placed in
a batch of its own with the same fixed context: ``--context-size`` texts of the run's training set
(default: the run's training batch size - 1), drawn with ``--seed``. The new texts never see each
other, so a text gets the same cluster whatever else is in the file and whatever the file's order.

Output: the input's row number (0-based data row), the text, ``cluster``, ``confidence``, ``margin``,
``assigned_by`` (head | kmeans) and ``top_words`` (the cluster's c-TF-IDF words from the run's
``clusters.json``); with ``--embeddings`` (Parquet output) the embedding too, float16. Rows without text are kept
with empty cluster cells and reported in one warning.

It runs as ``Trainer.predict`` (``evaluation.model_io.sharded_predict``) on ``--accelerator`` / ``--devices`` /
``--num-nodes`` (default: every GPU of the machine, else one CPU process): the input is cut into shards of
``--shard-rows`` rows, each process encodes its share, and each shard's result is written as a part the moment it is
complete (``evaluation.model_io.corpus_shards``). ``--output <folder>`` keeps the parts
(``part-<shard>.parquet``); ``--output <file>.csv|.parquet`` assembles them in row order at the end. The same
command run again after a crash encodes only the shards without a part, on any number of devices.
"""
from __future__ import annotations

import functools
import json
import logging
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Sequence

import numpy as np

from evaluation.model_io import run_files
from textcore import run_folder
from textcore.errors import MissingFileError, UserError
from textcore.kmeans import nearest, squared_distances
from textcore.run_folder import RunFolder

if TYPE_CHECKING:  # torch is imported where a model runs: `tools.py predict --help` needs none of it
    import torch

log = logging.getLogger(__name__)

ASSIGNERS = ("auto", "head", "kmeans")


class PredictInputError(UserError, ValueError):
    """A prediction input, model reference or option that cannot be used; the message says how to fix it."""


# -- assignment maths (pure functions on tensors) -------------------------------------------------------------
def nearest_centroid(embeddings, centroids, device=None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(cluster [N], cosine to its centroid [N], margin 1 - d1/d2 [N]) for [N, d] embeddings and [K, d]
    centroids (arrays or tensors); the cluster is the Euclidean-nearest centroid (KMeans's rule). Computed in
    float64 on ``device`` (default: the embeddings' device; the GPU's when they are there)."""
    import torch

    x = torch.as_tensor(embeddings)
    device = device or x.device
    x = x.to(device=device, dtype=torch.float64)
    c = torch.as_tensor(centroids).to(device=device, dtype=torch.float64)
    squared = squared_distances(x, c)  # [N, K]
    cluster = nearest(squared)[1]  # [N]
    if c.shape[0] > 1:
        two = squared.clamp_min(0.0).topk(2, dim=1, largest=False).values.sqrt()  # [N, 2], nearest first
        margin = torch.where(two[:, 1] > 0, 1.0 - two[:, 0] / two[:, 1].clamp_min(1e-12), torch.zeros_like(two[:, 0]))
    else:
        margin = torch.ones(len(x), dtype=torch.float64, device=device)
    chosen = c[cluster]  # [N, d]
    cosine = (x * chosen).sum(1) / (x.norm(dim=1) * chosen.norm(dim=1)).clamp_min(1e-12)
    return cluster.cpu().numpy(), cosine.cpu().numpy(), margin.cpu().numpy()


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
    embedder: object | None = None  # what embeds the texts: the encoder (backend torch) or an export of it

    @property
    def embedding_model(self):
        """The encoder, or its ONNX Runtime export after :func:`use_backend`."""
        return self.embedder if self.embedder is not None else self.encoder

    @functools.cached_property
    def space(self):
        """The run's UMAP (``textcore.cluster_space.SpaceMap``) when its centroids are in one (cluster_space=umap),
        else None; read from arrays, no code runs."""
        from textcore.cluster_space import SpaceMap

        return SpaceMap.load(self.folder)

    @property
    def has_head(self) -> bool:
        """Whether the method assigns new texts with its own cluster head (the module says so)."""
        return self.module is not None and self.module.has_cluster_head()


def load_cluster_model(reference: str | Path, trust_checkpoint: bool = False) -> ClusterModel:
    """A run folder, one of its checkpoints (read once, tensors and plain values only unless ``trust_checkpoint``),
    or a sentence-transformers folder written by ``evaluation.model_io.export``."""
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
        folder = path if RunFolder(path).has(run_folder.CENTRES) else path.parent
        return ClusterModel(encoder, pooling, folder, centroids=_centroids(folder, path))
    if path.suffix == ".ckpt":
        ckpt = path
    elif path.is_dir():
        ckpt = run_checkpoint(path)
    else:
        raise PredictInputError(
            f"--run '{path}' is neither a run folder, a .ckpt nor a sentence-transformers folder (modules.json)."
        )
    module, cfg, run_dir = load_run_module(ckpt, key="--run", trust=trust_checkpoint)
    if module is None:
        raise ModelLoadError(
            f"'{ckpt}' is not inside its run folder (no {run_folder.CONFIG} beside {run_folder.CHECKPOINTS}/), so its "
            "clusters are unknown: pass the run folder it was written to."
        )
    centroids = RunFolder(run_dir).centres()
    return ClusterModel(module.encoder, module.eval_pooling, run_dir, module, centroids,
                        int(cfg.get("batch_size") or 64), run_dir)


def use_backend(model: ClusterModel, backend: str) -> ClusterModel:
    """``model`` with its texts embedded on ``backend`` (``textcore.encoding.onnx_runtime``): the export is cached in
    the run folder (the export's folder for a sentence-transformers export) and checked against the encoder."""
    from textcore.encoding.onnx_runtime import embedder

    model.embedder = embedder(model.encoder, model.pooling, backend, model.run_dir or model.folder)
    return model


def _centroids(folder: Path, reference: Path | None = None) -> np.ndarray:
    centres = RunFolder(folder).centres()
    if centres is None:
        raise PredictInputError(
            f"No {run_folder.CENTRES} in '{reference or folder}' or beside it: export the model from a run that "
            "has them (`python tools.py export --run <run folder>` copies them), or pass the run folder."
        )
    return centres


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
                      f"(write it with `python tools.py describe --run <run folder>`).", stacklevel=2)
        return {}
    clusters = json.loads(path.read_text(encoding="utf-8")).get("partitions", {}).get(partition, [])
    return {c["cluster"]: ", ".join(w for w, _ in c["top_words"][:top_n]) for c in clusters}


# -- the command ----------------------------------------------------------------------------------------------------
def predict(reference, input_path, text_column: str = "text", output=None, assign: str = "auto",
            encoding: str | None = None, batch_size: int = 128, context_size: int | None = None, seed: int = 0,
            top_n: int = 5, *, accelerator: str = "auto", devices=1, num_nodes: int = 1,
            embeddings: bool = False, shard_rows: int | None = None,
            backend: str = "torch", trust_checkpoint: bool = False) -> list[dict] | dict | None:
    """Assign the texts of ``input_path`` to the clusters of ``reference``.

    ``trust_checkpoint``: the user's opt-in for a checkpoint holding more than tensors and plain values
    (``--trust-checkpoint``; docs/reliability.md).

    ``accelerator``, ``devices``, ``num_nodes``: Lightning's. One process by default here (several start their
    other ranks by running the command line again: the command's ``--devices auto`` is for ``tools.py``).

    With ``output`` (a folder, or a ``.csv`` / ``.parquet`` file): the parts are written shard by shard
    (``shard_rows``, default ``CHUNK_ROWS``), so a file of millions of texts takes the memory of one shard per
    process, and the return on rank 0 is a summary (``rows``, ``assigned``, ``assigned_by``, ``per_cluster``, ...);
    on the other ranks None. Without: the rows, as a list of dicts (small files, one process).

    ``backend``: what embeds the texts (``textcore.encoding.onnx_runtime``): ``torch``, or ``onnx`` / ``onnx-int8``
    on the CPU (the export cached in the run folder)."""
    import tempfile

    from evaluation.model_io import corpus_shards as shards
    from evaluation.model_io.sharded_predict import predict_on_devices

    shard_rows = CHUNK_ROWS if shard_rows is None else shard_rows
    output = Path(output) if output is not None else None
    _check_options(assign, batch_size, top_n, context_size, shard_rows, num_nodes, devices, output, embeddings)
    to_file = output is not None and output.suffix.lower() in (".csv", ".parquet")
    accelerator = _backend_accelerator(backend, accelerator)
    input_path = Path(input_path)
    next(text_chunks(input_path, text_column, encoding))  # the file's problems before the model is loaded
    model = load_cluster_model(reference, trust_checkpoint)
    if backend != "torch":
        use_backend(model, backend)
    use_head = uses_head(model, reference, assign)
    partition = "head" if use_head else "kmeans"
    words = cluster_words(model.folder, partition, top_n) if top_n else {}
    plan = {"input": shards.input_fingerprint(input_path), "text_column": text_column, "encoding": encoding,
            "shard_rows": shard_rows, "run": str(Path(reference).resolve()), "assigned_by": partition,
            "context_size": context_size, "seed": seed, "top_words": top_n, "embeddings": embeddings}
    if backend != "torch":  # parts of another backend differ in rounding: a resumed prediction does not mix them
        plan["backend"] = backend

    def chunks():
        return text_chunks(input_path, text_column, encoding)

    def finish(summary: dict) -> dict | list[dict]:
        if summary["blank_rows"]:
            _warn_blank_rows(input_path, encoding, summary)
        layout = shards.ShardLayout(summary["rows"], shard_rows)
        tables = shards.assembled_tables(folder, layout, text_column, partition, embeddings)
        if output is None:
            return shards.rows_as_dicts(tables)
        if to_file:
            shards.write_assembled(output, tables)
            shards.remove_folder(folder)
        return {k: v for k, v in summary.items() if k != "blank_rows"}

    make_context = None
    if use_head and model.module.cluster_context:
        def make_context():
            return _context_embeddings(model, context_size, seed, batch_size)
    options = dict(assign=assign_texts, make_context=make_context, use_head=use_head, words=words,
                   batch_size=batch_size, embeddings=embeddings, accelerator=accelerator, devices=devices,
                   num_nodes=num_nodes, finish=finish)
    if output is None:  # rows in memory: the parts live in a temporary folder
        with tempfile.TemporaryDirectory(prefix="predict-") as scratch:
            folder = Path(scratch)
            return predict_on_devices(model, chunks, folder, plan, shard_rows, **options)
    folder = output.with_name(output.name + ".parts") if to_file else output
    return predict_on_devices(model, chunks, folder, plan, shard_rows, **options)


def _check_options(assign, batch_size, top_n, context_size, shard_rows, num_nodes, devices, output: Path | None,
                   embeddings: bool) -> None:
    """predict's options, checked before the input or the model is read."""
    if assign not in ASSIGNERS:
        raise PredictInputError(f"--assign must be one of {ASSIGNERS}, got '{assign}'")
    if batch_size < 1 or top_n < 0 or (context_size is not None and context_size < 1) or shard_rows < 1 \
            or num_nodes < 1:
        raise PredictInputError("--batch-size, --shard-rows, --num-nodes and --context-size must be >= 1, "
                                "--top-words >= 0")
    if embeddings and (output is None or output.suffix.lower() == ".csv"):
        raise PredictInputError("--embeddings: the embeddings go into Parquet; give --output a .parquet file or a "
                                "folder (its part-<shard>.parquet files).")
    if output is None and (devices not in (1, "1") or num_nodes != 1):
        raise PredictInputError("rows returned in memory come from one process: give an output (a folder or a "
                                ".csv/.parquet file) to predict on several devices.")


def _backend_accelerator(backend: str, accelerator: str) -> str:
    """The accelerator of a prediction on ``backend``: the onnx backends run on the CPU."""
    from textcore.encoding.backends import check_backend

    check_backend(backend, "--backend")
    if backend == "torch":
        return accelerator
    if accelerator not in ("auto", "cpu"):
        raise PredictInputError(f"--backend {backend} runs on the CPU; drop --accelerator {accelerator} or use "
                                "--backend torch.")
    return "cpu"


def uses_head(model: ClusterModel, reference, assign: str) -> bool:
    """Whether ``assign`` (head | kmeans | auto) assigns by the model's cluster head; a choice the model cannot serve is
    a one-line ``PredictInputError`` naming ``reference``. The command and the API both decide here."""
    has_head = model.has_head
    if assign == "head" and not has_head:
        raise PredictInputError(
            f"--assign head: '{reference}' has no cluster head (SCCL or AECL); use --assign kmeans."
        )
    # auto: the head, unless the run clustered in a UMAP (its clusters are then the KMeans of that space)
    use_head = has_head and (assign == "head" or (assign != "kmeans" and model.space is None))
    if not use_head and model.centroids is None:
        raise PredictInputError(
            f"'{reference}' has no cluster head and no {run_files.CENTROIDS}: it was trained without the "
            "prediction writer (dataset.callbacks.clustering_predictions) or is not a clustering run."
        )
    return use_head


def _warn_blank_rows(input_path: Path, encoding, summary: dict) -> None:
    """One warning for the rows without text, naming the file lines of the first ten."""
    from datamodules.table_reader import file_lines

    lines = file_lines(input_path, encoding, summary["rows"])
    shown = [lines[i] for i in summary["blank_rows"]]
    blanks = summary["blanks"]
    warnings.warn(f"{input_path}: {blanks} row(s) without text (file lines {shown}{', ...' if blanks > 10 else ''})"
                  " are written without a cluster.", stacklevel=3)


def assign_texts(model: ClusterModel, texts: Sequence[str], blank: np.ndarray | None = None, *, use_head: bool,
                 context=None, batch_size: int = 128) -> tuple[np.ndarray, np.ndarray, np.ndarray, torch.Tensor | None]:
    """(cluster, confidence, margin, embeddings) of texts in memory: the texts that are not ``blank`` (default: empty
    or whitespace) embedded by ``model.embedding_model`` and assigned (:func:`_assign`); a blank text gets cluster
    -1 and NaN. ``embeddings`` [kept rows, d] (float32, CPU), None when every text is blank. What the command's
    shards and the Python API's ``predict`` both run."""
    n = len(texts)
    if blank is None:
        blank = np.fromiter((not t.strip() for t in texts), dtype=bool, count=n)
    keep = np.flatnonzero(~blank)
    cluster = np.full(n, -1, dtype=np.int64)
    confidence = np.full(n, np.nan)
    margin = np.full(n, np.nan)
    embedded = None
    if len(keep):
        embedded = model.embedding_model.encode([texts[i] for i in keep], batch_size=batch_size,
                                                pooling=model.pooling)
        chosen, conf, lead = _assign(model, embedded, context, use_head)
        cluster[keep] = chosen
        confidence[keep] = np.asarray(conf, dtype=np.float64)
        margin[keep] = np.asarray(lead, dtype=np.float64)
    return cluster, confidence, margin, embedded


def _assign(model: ClusterModel, embeddings: torch.Tensor, context, use_head: bool):
    """(cluster, confidence, margin) of each row of ``embeddings``, computed on the model's device (a refined UMAP's
    linear classifier: on the CPU, a matrix product in blocks)."""
    import torch

    device = next(model.encoder.parameters()).device
    if use_head:
        with torch.no_grad():
            p = model.module.cluster_probabilities(embeddings.to(device), context)  # [N, K]
        return probabilities_to_assignment(p)
    if model.space is not None and model.space.refined:  # the run's clusters are its linear classifier's argmax
        cluster, top = model.space.assign(embeddings.float().cpu().numpy())
        return cluster, top[:, 0], top[:, 0] - top[:, 1]
    if model.space is not None:  # centroids in the run's UMAP: the texts go through it first
        embeddings = torch.from_numpy(model.space.transform(embeddings.float().cpu().numpy()))
    return nearest_centroid(embeddings, model.centroids, device)


def _context_embeddings(model: ClusterModel, context_size, seed: int, batch_size: int) -> torch.Tensor:
    if model.run_dir is None:
        raise PredictInputError("AECL's head needs the run folder (its training texts form the attention context).")
    training = run_files.load_predictions(model.run_dir).texts
    size = min(context_size or max(model.batch_size - 1, 1), len(training))
    rows = np.sort(np.random.default_rng(seed).choice(len(training), size=size, replace=False))
    log.info("AECL head: each text attends to %d training texts (seed %d) and itself", size, seed)
    return model.embedding_model.encode([training[i] for i in rows], batch_size=batch_size, pooling=model.pooling)
