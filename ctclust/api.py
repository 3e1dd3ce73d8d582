"""Cluster texts from Python, in the style of BERTopic and scikit-learn.

    from ctclust import TextClusterer, load_demo

    texts = load_demo()["text"]
    clusterer = TextClusterer(num_clusters=8)          # SCCL, the offline MiniLM, the demo budget
    labels = clusterer.fit_predict(texts)              # a list of strings, a pandas Series or a file path
    clusterer.clusters_                                # cluster, size, top words, examples (a DataFrame)
    clusterer.predict(["a new text"])                  # the trained model on new texts
    clusterer.transform(texts)                         # embeddings [N, d]
    TextClusterer.load("logs/train/runs/...")          # a run folder (or an export, a Hub name: transform)

``fit`` composes the same Hydra configuration as ``python run.py`` (``conf/``) and trains through the same code
(``ctclust.training``): the settings of a command line give the same run here. The run folder ``run_dir_`` holds
what a command-line run writes (results.json, predictions.csv, clusters.md, report.html, checkpoints).
Bad input raises the command line's errors (``textcore.errors.UserError`` subclasses, messages naming the key or
the row and the fix); nothing here exits the interpreter.
"""
from __future__ import annotations

import logging
import math
import os
import time
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

import numpy as np
from sklearn.base import BaseEstimator, ClusterMixin, TransformerMixin
from sklearn.utils.validation import check_is_fitted

from textcore.checkout import CONF, ROOT
from textcore.encoding.backends import check_backend
from textcore.errors import ConfigError, MissingFileError, UserError

log = logging.getLogger(__name__)

TEXT_COLUMN = "text"
LABEL_COLUMN = "label"
DEMO = ROOT / "datamodules" / "demo_data" / "demo.csv"
INPUT_FILE = "texts.csv"  # texts given in memory are written here, in the run folder, and trained on from there


class TextInputError(UserError, ValueError):
    """Texts that cannot be clustered (not strings, empty); the message names the position and the fix."""


class TextClusterer(ClusterMixin, TransformerMixin, BaseEstimator):
    """Train a clustering method on a corpus and assign texts to its clusters: a scikit-learn estimator (``clone``,
    ``get_params``/``set_params``, ``Pipeline``, ``GridSearchCV``) whose input is a list of texts.

    Args:
        method: a method of ``conf/method/`` (``sccl``, ``aecl``, ...).
        backbone: a backbone of ``conf/backbone/`` (``minilm`` offline, ``bert_base``, ``tiny``, ...).
        num_clusters: K, or ``"auto"`` (chosen from the texts before training, without labels), or None with
            labels (the number of distinct labels).
        overrides: any further setting of the command line, as ``["trainer.max_steps=500", ...]`` or a mapping
            ``{"trainer.max_steps": 500}`` (the default budget, 150 steps or 2 epochs, whichever ends first: on a
            corpus under 4,800 texts add ``trainer.max_epochs=-1`` for every step).
        seed: the run's seed (``seed=``).
        run_dir: the run folder to write (default: ``logs/train/runs/<method>_api/<time>`` in the checkout,
            where ``python run.py`` writes). A folder that already holds a run is not trained over: a refit (or
            each fit of a ``GridSearchCV``) writes ``<run_dir>-2``, ``<run_dir>-3``, ...
        text_column: the column of a file's texts (default: ``text``, else the file's only text column).
        verbose: show a progress bar for training and for every pass over the texts, the training budget and the
            result table; False: print nothing.
        backend: what embeds texts in ``predict`` / ``transform``: ``torch``, ``onnx`` or ``onnx-int8`` (ONNX
            Runtime on the CPU, the export cached in the run folder; ``textcore.encoding.onnx_runtime``).
        trust_checkpoint: load a checkpoint that holds more than tensors and plain values (pickled objects can run
            code: only for a file you trust; docs/reliability.md).

    The settings are stored as given and checked by ``fit`` (scikit-learn's contract). Fitted attributes:
    ``labels_`` (the cluster of every training text, the method's head when it has one, else KMeans),
    ``clusters_`` (a DataFrame: cluster, size, top_words, examples), ``num_clusters_``, ``run_dir_``, ``results_``
    (results.json), ``model_`` (what ``predict`` and ``transform`` load, once).
    """

    def __init__(self, method: str = "sccl", backbone: str = "minilm", num_clusters: int | str | None = "auto",
                 overrides: Sequence[str] | Mapping[str, object] | None = None, *, seed: int = 42,
                 run_dir: str | os.PathLike | None = None, text_column: str | None = None, verbose: bool = True,
                 backend: str = "torch", trust_checkpoint: bool = False):
        self.method = method
        self.backbone = backbone
        self.num_clusters = num_clusters
        self.overrides = overrides
        self.seed = seed
        self.run_dir = run_dir
        self.text_column = text_column
        self.verbose = verbose
        self.backend = backend
        self.trust_checkpoint = trust_checkpoint

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.two_d_array = False  # one text per sample, not a row of numbers
        tags.input_tags.string = True
        tags.target_tags.required = False  # labels only score the clusters
        tags.non_deterministic = False  # a seed makes a CPU run repeatable
        return tags

    def _more_tags(self) -> dict:  # scikit-learn < 1.6 reads these
        return {"X_types": ["string"], "requires_y": False}

    def __getstate__(self) -> dict:
        state = dict(self.__dict__)
        state.pop("_loaded", None)  # a loaded model (an ONNX Runtime session among it) is loaded again on use
        return state

    # -- training ---------------------------------------------------------------------------------------------
    def fit(self, X, y: Sequence | None = None) -> TextClusterer:
        """Train on ``X``: texts (a list of strings, a pandas Series, or a CSV/TSV/JSONL/Parquet/text file path);
        ``y`` (optional, one label per text) only scores the clusters (ACC/NMI), as a labelled file's column does.
        Returns the clusterer."""
        from ctclust.api_output import api_output, print_budget
        from ctclust.training.train import train

        _check_num_clusters(self.num_clusters)
        check_backend(self.backend)
        user_overrides = _override_list(self.overrides)
        run_dir = _fresh_run_dir(Path(self.run_dir) if self.run_dir is not None else _default_run_dir(self.method))
        data_dir, file, text_column, label_column, count = self._training_file(X, y, run_dir)
        overrides = [f"method={self.method}", f"backbone={self.backbone}", "dataset=csv", f"data_dir={data_dir}",
                     f"dataset.file={file}", f"seed={self.seed}",
                     f"dataset.num_clusters={'null' if self.num_clusters is None else self.num_clusters}"]
        overrides += [f"dataset.text_column={text_column}" if text_column else "dataset.text_column=null",
                      f"dataset.label_column={label_column}" if label_column else "dataset.label_column=null"]
        cfg = compose(overrides + _display_overrides(self.verbose, user_overrides) + user_overrides, run_dir)
        self._forget_model()
        with api_output(self.verbose):
            if self.verbose:
                print_budget(cfg, count)
            self.results_ = train(cfg)
        self._read_run(Path(self.results_["output_dir"]))
        return self

    def fit_predict(self, X, y: Sequence | None = None) -> np.ndarray:
        """``fit``, then the cluster of every training text (``labels_``)."""
        return self.fit(X, y).labels_

    def _training_file(self, texts, labels, run_dir: Path):
        """(data_dir, file, text column, label column, number of texts or None) of what to train on: a file as it
        is, texts in memory written to ``<run_dir>/texts.csv``."""
        if isinstance(texts, (str, os.PathLike)):
            path = Path(texts).expanduser()
            if not path.is_file():
                raise MissingFileError(f"texts='{texts}': no such file; pass a list of texts or the path of a "
                                       "CSV/TSV/JSON Lines/Parquet/text file.")
            if labels is not None:
                raise ConfigError("labels=...: with a file, name its label column instead: "
                                  "overrides={'dataset.label_column': '<column>'}.")
            return path.resolve().parent, path.name, self.text_column, None, None
        import pandas as pd

        values = _text_list(texts)
        frame = pd.DataFrame({TEXT_COLUMN: values})
        if labels is not None:
            labels = list(labels)
            if len(labels) != len(values):
                raise TextInputError(f"labels: {len(labels)} labels for {len(values)} texts; give one per text.")
            frame[LABEL_COLUMN] = labels
        run_dir.mkdir(parents=True, exist_ok=True)
        frame.to_csv(run_dir / INPUT_FILE, index=False)
        return run_dir.resolve(), INPUT_FILE, TEXT_COLUMN, LABEL_COLUMN if labels is not None else None, len(values)

    # -- a trained run ----------------------------------------------------------------------------------------
    @classmethod
    def load(cls, model: str | os.PathLike, **params) -> TextClusterer:
        """A trained run folder (everything: ``labels_``, ``clusters_``, ``predict``, ``transform``), or any model
        the tools load (a ``.ckpt``, a sentence-transformers export, a Hub name, ``minilm``: ``transform``, and
        ``predict`` when the export has its run's centroids). ``params``: constructor settings (``verbose``,
        ``backend``, ``trust_checkpoint``, ...). A checkpoint is loaded as tensors and plain values only;
        ``trust_checkpoint=True`` loads one that holds more (pickled objects can run code: only for a file you
        trust; docs/reliability.md)."""
        from textcore.run_folder import RunFolder

        clusterer = cls(**params)
        path = Path(model)
        if path.is_dir() and RunFolder(path).results_file.is_file():
            clusterer._read_run(path)
        else:
            clusterer.model_ = str(model)
        return clusterer

    def _read_run(self, run_dir: Path) -> None:
        from evaluation.model_io import run_files
        from textcore.run_folder import RunFolder

        self.run_dir_ = run_dir
        self.model_ = str(run_dir)
        self.results_ = RunFolder(run_dir).results()
        predictions = run_files.load_predictions(run_dir)
        self.labels_ = predictions.partitions[predictions.primary].astype(np.int64)
        self.num_clusters_ = run_files.num_clusters(run_dir, predictions)
        self.clusters_ = _cluster_table(run_dir, predictions)

    # -- new texts --------------------------------------------------------------------------------------------
    def predict(self, X, batch_size: int = 128) -> np.ndarray:
        """The cluster of each text of ``X`` (a list, a Series or a file path) in the trained run's clusters: its
        cluster head when the method has one (unless the run clustered in a UMAP), else the run's KMeans: the nearest
        centre, or, in a UMAP refined by its linear classifier (``umap.refine=linear``, the default), that
        classifier's cluster; -1 for an empty text (the rule of ``tools.py predict``, docs/clusters.md). The model is
        loaded at the first call and kept for the next ones."""
        from ctclust.api_output import api_output
        from evaluation.model_io.predict import assign_texts

        check_is_fitted(self, "model_")
        texts = self._texts(X, allow_empty=True)
        with api_output(self.verbose):
            loaded = self._loaded_model()
            if loaded.context is _NOT_MADE:
                loaded.context = loaded.make_context(batch_size)
            cluster, _, _, _ = assign_texts(loaded.model, texts, use_head=loaded.use_head, context=loaded.context,
                                            batch_size=batch_size)
        return cluster

    def transform(self, X, batch_size: int = 128, device: str | None = None) -> np.ndarray:
        """Embeddings [N, d] (float32) of the texts of ``X`` with the trained (or loaded) encoder and its evaluation
        pooling: on ``backend``; with torch on the GPU when there is one (``device``: ``cpu``, ``cuda``, ...)."""
        from ctclust.api_output import api_output

        check_is_fitted(self, "model_")
        if device not in (None, "cpu") and self.backend != "torch":
            raise ConfigError(f"transform(device='{device}'): backend '{self.backend}' runs on the CPU; drop device or "
                              "use backend='torch'.")
        texts = self._texts(X)
        with api_output(self.verbose):
            embedder = self._loaded_model().model.embedding_model
            if device is not None and self.backend == "torch":
                embedder.to(device)
            return embedder.encode(texts, batch_size=batch_size, pooling=self._loaded_model().model.pooling).numpy()

    def _loaded_model(self) -> _Loaded:
        """The model of ``model_`` on ``backend``, loaded at the first use and kept (``_loaded``)."""
        key = (self.model_, self.backend, self.trust_checkpoint)
        loaded = getattr(self, "_loaded", None)
        if loaded is None or loaded.key != key:
            loaded = _load(self.model_, self.backend, self.trust_checkpoint)
            self._loaded = loaded
        return loaded

    def _forget_model(self) -> None:
        self.__dict__.pop("_loaded", None)

    def _texts(self, X, allow_empty: bool = False) -> list[str]:
        if isinstance(X, (str, os.PathLike)):
            from evaluation.model_io.predict import read_texts

            path = Path(X).expanduser()
            if not path.is_file():
                raise MissingFileError(f"texts='{X}': no such file.")
            texts, _, _ = read_texts(path, self.text_column or TEXT_COLUMN)
            return texts
        return _text_list(X, allow_empty=allow_empty)


_NOT_MADE = object()


class _Loaded:
    """A model loaded for ``predict`` / ``transform``: the cluster model (encoder, head or centroids, on the
    backend), whether its head assigns, and the AECL context (made at the first ``predict``)."""

    def __init__(self, key, model, use_head: bool, make_context):
        self.key, self.model, self.use_head, self.make_context = key, model, use_head, make_context
        self.context = _NOT_MADE


def _load(reference: str, backend: str, trust_checkpoint: bool) -> _Loaded:
    from evaluation.model_io import predict as assigning
    from textcore.run_folder import RunFolder

    path = Path(reference)
    is_run = path.is_dir() and (RunFolder(path).results_file.is_file() or (path / "modules.json").is_file()) \
        or path.suffix == ".ckpt"
    if is_run:
        model = assigning.load_cluster_model(path, trust_checkpoint)
        if backend != "torch":
            assigning.use_backend(model, backend)
        # the command's rule (the head, unless the run clustered in a UMAP; else the KMeans: its centres or its
        # UMAP's linear classifier, evaluation.model_io.predict._assign); neither:
        # transform only (predict raises the command's message)
        use_head = assigning.uses_head(model, reference, "auto") if model.has_head or model.centroids is not None \
            else None
    else:  # a model the tools load (a Hub name, minilm, a model folder): transform only
        from evaluation.model_io.load import load_encoder
        from textcore.encoding.onnx_runtime import embedder

        encoder, pooling = load_encoder(reference, trust_checkpoint=trust_checkpoint)
        model = assigning.ClusterModel(encoder, pooling, path)
        if backend != "torch":
            model.embedder = embedder(encoder, pooling, backend)
        use_head = None
    if backend == "torch":
        import torch

        if torch.cuda.is_available():
            (model.module if model.module is not None else model.encoder).to("cuda")

    def make_context(batch_size: int):
        if use_head is None:
            assigning.uses_head(model, reference, "auto")  # no head, no centroids: the command's error
        if use_head and model.module.cluster_context:
            return assigning._context_embeddings(model, None, 0, batch_size)
        return None

    return _Loaded((reference, backend, trust_checkpoint), model, bool(use_head), make_context)


def load_demo():
    """The embedded demo corpus as a DataFrame (``text``, ``label``): 720 short titles and questions in 8 topics
    written for this project (``datamodules/demo_data/demo.csv``, what ``python run.py`` trains on)."""
    import pandas as pd

    return pd.read_csv(DEMO, dtype=str, keep_default_na=False)


# -- helpers ------------------------------------------------------------------------------------------------------
def compose(overrides: Sequence[str], run_dir: Path):
    """The configuration ``python run.py <overrides> hydra.run.dir=<run_dir>`` composes."""
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra
    from hydra.errors import HydraException

    os.environ.setdefault("PROJECT_ROOT", str(ROOT))  # conf/paths reads it (ctclust.training sets it too)
    GlobalHydra.instance().clear()
    try:
        with initialize_config_dir(config_dir=str(CONF), version_base="1.3", job_name="run"):
            return hydra_compose(config_name="config",
                                 overrides=[*overrides, f"paths.output_dir={run_dir.resolve()}"])
    except HydraException as err:  # an unknown config group option or key: Hydra's message, as the command line's
        raise ConfigError(f"{err} (overrides: {' '.join(overrides)})") from None
    finally:
        GlobalHydra.instance().clear()


def _default_run_dir(method: str) -> Path:
    return ROOT / "logs" / "train" / "runs" / f"{method}_api" / time.strftime("%Y-%m-%d_%H-%M-%S")


def _fresh_run_dir(run_dir: Path) -> Path:
    """``run_dir``, or ``<run_dir>-2``, ``-3``, ... when it already holds a run: a new fit never resumes or
    overwrites another (a run folder with a checkpoint would be resumed by ``train``)."""
    from textcore.run_folder import RunFolder

    def used(folder: Path) -> bool:
        run = RunFolder(folder)
        return folder.is_dir() and (run.results_file.exists() or run.config_file.exists()
                                    or run.checkpoint_path().parent.exists())

    candidate, n = run_dir, 1
    while used(candidate):
        n += 1
        candidate = run_dir.with_name(f"{run_dir.name}-{n}")
    return candidate


def _check_num_clusters(num_clusters) -> None:
    if num_clusters is not None and num_clusters != "auto" and not (
            isinstance(num_clusters, (int, np.integer)) and not isinstance(num_clusters, bool) and num_clusters >= 2):
        raise ConfigError(f"num_clusters={num_clusters!r}: give K >= 2, 'auto' (chosen from the texts) or None "
                          "(the number of distinct labels passed to fit).")


def _display_overrides(verbose: bool, user_overrides: Sequence[str]) -> list[str]:
    """What a run of the API shows (``ctclust.api_output``): a notebook-aware training bar when ``verbose``, else
    nothing; never the layer table or the plain progress lines (log lines, which a notebook does not show). A key
    the user's own overrides set is left to them."""
    if verbose:
        wanted = {"callbacks.progress": "callbacks.progress._target_=lightning.pytorch.callbacks.TQDMProgressBar",
                  "trainer.enable_progress_bar": "trainer.enable_progress_bar=true"}
    else:
        wanted = {"callbacks.progress": "~callbacks.progress", "trainer.enable_progress_bar":
                  "trainer.enable_progress_bar=false", "print_table": "print_table=false"}
    wanted.update({"callbacks.progress_lines": "~callbacks.progress_lines",
                   "callbacks.model_summary": "~callbacks.model_summary"})
    touched = {o.lstrip("~+").split("=", 1)[0] for o in user_overrides}
    return [o for key, o in wanted.items() if not any(t == key or t.startswith(key + ".") for t in touched)]


def _override_list(overrides) -> list[str]:
    if overrides is None:
        return []
    if isinstance(overrides, Mapping):
        return [f"{key}={_hydra_value(value)}" for key, value in overrides.items()]
    if isinstance(overrides, str):
        raise ConfigError(f"overrides={overrides!r}: give a list of 'key=value' strings or a dict.")
    out = list(overrides)
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra.errors import OverrideParseException

    for override in out:  # Hydra's own parser: what the command line accepts, with its message
        if not isinstance(override, str):
            raise ConfigError(f"overrides: {override!r} is not a string such as 'trainer.max_steps=500'.")
        try:
            OverridesParser.create().parse_overrides([override])
        except OverrideParseException as err:
            raise ConfigError(f"overrides: {override!r} is not a command-line setting "
                              f"(e.g. 'trainer.max_steps=500'): {err}") from None
    return out


def _hydra_value(value) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, (list, tuple)):
        return "[" + ",".join(_hydra_value(v) for v in value) + "]"
    return str(value)


def _text_list(texts, allow_empty: bool = False) -> list[str]:
    """``texts`` as a list of strings; a value that is not one is an error naming its position."""
    if isinstance(texts, (bytes, Mapping)) or not isinstance(texts, Iterable):
        raise TextInputError(f"texts: expected a list of strings, a pandas Series or a file path, got "
                             f"{type(texts).__name__}.")
    import pandas as pd

    values = list(texts)
    names = list(texts.index) if isinstance(texts, pd.Series) else range(len(values))
    for name, value in zip(names, values):
        if not isinstance(value, str):
            missing = value is None or (isinstance(value, float) and math.isnan(value))
            raise TextInputError(
                f"texts[{name!r}] is {'missing' if missing else type(value).__name__ + ' ' + repr(value)[:40]}, "
                "not a text: drop it (e.g. series.dropna()) or convert it (series.astype(str)).")
    if not values and not allow_empty:
        raise TextInputError("texts is empty: give at least as many texts as clusters.")
    return values


def _cluster_table(run_dir: Path, predictions):
    """cluster, size, top_words, examples of the run's primary partition (clusters.json, written at the end of a
    run; described again when the run's report was switched off)."""
    import json

    import pandas as pd

    from evaluation.model_io import run_files

    path = run_dir / run_files.CLUSTERS_JSON
    if path.is_file():
        report = json.loads(path.read_text(encoding="utf-8"))
    else:
        from evaluation.run_report.describe import cluster_report

        report = cluster_report(run_dir, predictions=predictions)
    rows = report["partitions"][report["primary"]]
    return pd.DataFrame({
        "cluster": [r["cluster"] for r in rows],
        "size": [r["size"] for r in rows],
        "top_words": [", ".join(w for w, _ in r["top_words"]) for r in rows],
        "examples": [[e["text"] for e in r["representatives"]] for r in rows],
    })
