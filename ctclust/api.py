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

from textcore.checkout import CONF, ROOT
from textcore.errors import ConfigError, MissingFileError, UserError

log = logging.getLogger(__name__)

TEXT_COLUMN = "text"
LABEL_COLUMN = "label"
DEMO = ROOT / "datamodules" / "demo_data" / "demo.csv"
INPUT_FILE = "texts.csv"  # texts given in memory are written here, in the run folder, and trained on from there


class TextInputError(UserError, ValueError):
    """Texts that cannot be clustered (not strings, empty); the message names the position and the fix."""


class TextClusterer:
    """Train a clustering method on a corpus and assign texts to its clusters.

    Args:
        method: a method of ``conf/method/`` (``sccl``, ``aecl``, ...).
        backbone: a backbone of ``conf/backbone/`` (``minilm`` offline, ``bert_base``, ``tiny``, ...).
        num_clusters: K, or ``"auto"`` (chosen from the texts before training, without labels), or None with
            labels (the number of distinct labels).
        overrides: any further setting of the command line, as ``["trainer.max_steps=500", ...]`` or a mapping
            ``{"trainer.max_steps": 500}``.
        seed: the run's seed (``seed=``).
        run_dir: the run folder to write (default: ``logs/train/runs/<method>_api/<time>`` in the checkout,
            where ``python run.py`` writes).
        text_column: the column of a file's texts (default: ``text``, else the file's only text column).

    Fitted attributes: ``labels_`` (the cluster of every training text, the method's head when it has one, else
    KMeans), ``clusters_`` (a DataFrame: cluster, size, top_words, examples), ``num_clusters_``, ``run_dir_``,
    ``results_`` (results.json).
    """

    def __init__(self, method: str = "sccl", backbone: str = "minilm", num_clusters: int | str | None = "auto",
                 overrides: Sequence[str] | Mapping[str, object] | None = None, *, seed: int = 42,
                 run_dir: str | os.PathLike | None = None, text_column: str | None = None):
        if num_clusters is not None and num_clusters != "auto" and not (
                isinstance(num_clusters, int) and not isinstance(num_clusters, bool) and num_clusters >= 2):
            raise ConfigError(f"num_clusters={num_clusters!r}: give K >= 2, 'auto' (chosen from the texts) or None "
                              "(the number of distinct labels passed to fit).")
        self.method = method
        self.backbone = backbone
        self.num_clusters = num_clusters
        self.overrides = _override_list(overrides)
        self.seed = seed
        self.run_dir = run_dir
        self.text_column = text_column

    # -- training ---------------------------------------------------------------------------------------------
    def fit(self, texts, labels: Sequence | None = None) -> TextClusterer:
        """Train on ``texts`` (a list of strings, a pandas Series, or a CSV/TSV/JSONL/Parquet/text file path);
        ``labels`` (optional, one per text) only score the clusters (ACC/NMI), as a labelled file's column does."""
        from ctclust.training.train import train

        run_dir = Path(self.run_dir) if self.run_dir is not None else _default_run_dir(self.method)
        data_dir, file, text_column, label_column = self._training_file(texts, labels, run_dir)
        overrides = [f"method={self.method}", f"backbone={self.backbone}", "dataset=csv", f"data_dir={data_dir}",
                     f"dataset.file={file}", f"seed={self.seed}",
                     f"dataset.num_clusters={'null' if self.num_clusters is None else self.num_clusters}"]
        overrides += [f"dataset.text_column={text_column}" if text_column else "dataset.text_column=null",
                      f"dataset.label_column={label_column}" if label_column else "dataset.label_column=null"]
        cfg = compose(overrides + self.overrides, run_dir)
        self.results_ = train(cfg)
        self._read_run(Path(self.results_["output_dir"]))
        return self

    def fit_predict(self, texts, labels: Sequence | None = None) -> np.ndarray:
        """``fit``, then the cluster of every training text (``labels_``)."""
        return self.fit(texts, labels).labels_

    def _training_file(self, texts, labels, run_dir: Path) -> tuple[Path, str, str | None, str | None]:
        """(data_dir, file, text column, label column) of what to train on: a file as it is, texts in memory written
        to ``<run_dir>/texts.csv``."""
        if isinstance(texts, (str, os.PathLike)):
            path = Path(texts).expanduser()
            if not path.is_file():
                raise MissingFileError(f"texts='{texts}': no such file; pass a list of texts or the path of a "
                                       "CSV/TSV/JSON Lines/Parquet/text file.")
            if labels is not None:
                raise ConfigError("labels=...: with a file, name its label column instead: "
                                  "overrides={'dataset.label_column': '<column>'}.")
            return path.resolve().parent, path.name, self.text_column, None
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
        return run_dir.resolve(), INPUT_FILE, TEXT_COLUMN, LABEL_COLUMN if labels is not None else None

    # -- a trained run ----------------------------------------------------------------------------------------
    @classmethod
    def load(cls, model: str | os.PathLike, *, trust_checkpoint: bool = False) -> TextClusterer:
        """A trained run folder (everything: ``labels_``, ``clusters_``, ``predict``, ``transform``), or any model
        the tools load (a ``.ckpt``, a sentence-transformers export, a Hub name, ``minilm``: ``transform``, and
        ``predict`` when the export has its run's centroids). A checkpoint is loaded as tensors and plain values
        only; ``trust_checkpoint=True`` loads one that holds more (pickled objects can run code: only for a file
        you trust; docs/reliability.md)."""
        from textcore.run_folder import RunFolder

        clusterer = cls()
        clusterer.trust_checkpoint = trust_checkpoint
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
    def predict(self, texts, batch_size: int = 128) -> np.ndarray:
        """The cluster of each of ``texts`` (a list, a Series or a file path) in the trained run's clusters: its
        cluster head when the method has one, else the nearest KMeans centre; -1 for an empty text."""
        import tempfile

        import pandas as pd

        from evaluation.model_io.predict import predict

        model = self._model()
        with tempfile.TemporaryDirectory() as folder:
            path, column = self._texts_file(texts, Path(folder))
            rows = predict(model, path, text_column=column, batch_size=batch_size, top_n=0,
                           trust_checkpoint=getattr(self, "trust_checkpoint", False))
        clusters = pd.Series([row["cluster"] for row in rows]).replace("", -1)
        return clusters.to_numpy(dtype=np.int64)

    def transform(self, texts, batch_size: int = 128, device: str | None = None) -> np.ndarray:
        """Embeddings [N, d] (float32) of ``texts`` with the trained (or loaded) encoder and its evaluation
        pooling, on the GPU when there is one (``device``: ``cpu``, ``cuda``, ``cuda:1``, ...)."""
        import torch

        from evaluation.model_io.load import load_encoder

        encoder, pooling = load_encoder(self._model(), trust_checkpoint=getattr(self, "trust_checkpoint", False))
        device = device or ("cuda" if torch.cuda.is_available() else "cpu")
        values = _text_list(texts) if not isinstance(texts, (str, os.PathLike)) else self._file_texts(texts)
        return encoder.to(device).encode(values, batch_size=batch_size, pooling=pooling).numpy()

    def _model(self) -> str:
        model = getattr(self, "model_", None)
        if model is None:
            raise ConfigError("this TextClusterer is not fitted: call fit(texts) or TextClusterer.load(<run folder>).")
        return model

    def _texts_file(self, texts, folder: Path) -> tuple[Path, str]:
        if isinstance(texts, (str, os.PathLike)):
            path = Path(texts).expanduser()
            if not path.is_file():
                raise MissingFileError(f"texts='{texts}': no such file.")
            return path, self.text_column or TEXT_COLUMN
        import pandas as pd

        path = folder / INPUT_FILE
        pd.DataFrame({TEXT_COLUMN: _text_list(texts, allow_empty=True)}).to_csv(path, index=False)
        return path, TEXT_COLUMN

    def _file_texts(self, path) -> list[str]:
        from evaluation.model_io.predict import read_texts

        texts, _, _ = read_texts(Path(path), self.text_column or TEXT_COLUMN)
        return texts

    def __repr__(self) -> str:
        state = f", run_dir_='{self.run_dir_}'" if hasattr(self, "run_dir_") else ""
        return (f"TextClusterer(method='{self.method}', backbone='{self.backbone}', "
                f"num_clusters={self.num_clusters!r}{state})")


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
