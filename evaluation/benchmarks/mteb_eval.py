"""MTEB tasks run through the ``mteb`` package with this project's encoder (docs/evaluation.md, "MTEB").

    python tools.py evaluate --model <run | export | Hub name> --tasks mteb \
        --mteb-tasks STS12,Banking77Classification,my_texts.csv

The encoder MTEB sees is ours: the texts go through the same ``encode`` as every other task
(the run's evaluation pooling, the token limit ``--mteb-max-length`` and, for a prompt-based
model, its template), so an MTEB score and a clustering score of one model describe the same
embeddings. MTEB's own protocol then scores them (v-measure of its k-means sub-sampling for
clustering, cosine Spearman for STS, its logistic regression for classification, ...): the
table is named after MTEB and its version, never mixed with the papers' protocols.

Task names are MTEB's (``mteb.get_tasks``); an entry that is a local file becomes a task too:

- a table with a ``text`` and a ``label`` column: a clustering task (``LocalClustering.<stem>``);
- a table with ``sentence1``, ``sentence2`` and ``score``: an STS task (``LocalSTS.<stem>``),
  scores assumed on 0..5 unless ``--mteb-sts-range lo:hi`` says otherwise.

MTEB's result files land in ``<out>/mteb/results/<model>/<revision>/<task>.json`` (MTEB's layout,
readable by ``mteb.ResultCache``); the returned dict holds the main score of each task.

A Hub task whose dataset is neither in the local Hugging Face cache nor reachable stops before
anything is embedded, with one message that names the task and its dataset.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Callable, Sequence

import numpy as np

from datamodules.table_reader import FORMATS
from textcore.errors import ConfigError, UserError

Encode = Callable[[list[str]], np.ndarray]
PROTOCOL = "MTEB"
LOCAL_PREFIXES = {"clustering": "LocalClustering", "sts": "LocalSTS"}


class MtebUnavailableError(UserError, RuntimeError):
    """MTEB cannot run here: the package is missing or a task's data cannot be had offline."""


def mteb_version() -> str:
    import mteb

    return getattr(mteb, "__version__", "unknown")


def _import_mteb():
    try:
        import mteb
    except ImportError:
        raise MtebUnavailableError(
            "--tasks mteb needs the `mteb` package: `pip install 'mteb>=2,<3'` (make install includes it)."
        ) from None
    return mteb


def make_encoder(encode: Encode, name: str, embed_dim: int | None = None, max_tokens: int | None = None):
    """An MTEB encoder (``mteb.models.AbsEncoder``) that embeds every text with ``encode``."""
    _import_mteb()
    from mteb.models.abs_encoder import AbsEncoder
    from mteb.models.model_meta import ModelMeta, ScoringFunction

    class ProjectEncoder(AbsEncoder):
        def __init__(self):
            self.mteb_model_meta = ModelMeta.create_empty({
                "name": name,
                "revision": "local",
                "embed_dim": embed_dim,
                "max_tokens": max_tokens,
                "similarity_fn_name": ScoringFunction.COSINE,  # the papers' similarity
                "framework": ["PyTorch"],
                "open_weights": True,
            })

        def encode(self, inputs, *, task_metadata, hf_split, hf_subset, prompt_type=None, **kwargs):
            texts = [str(t) for batch in inputs for t in batch["text"]]
            return np.asarray(encode(texts), dtype=np.float32)

    return ProjectEncoder()


def mteb_model_name(label: str) -> str:
    """MTEB stores results under ``<org>/<name>``; a label without an organisation gets ``local/``."""
    clean = "".join(c if c.isalnum() or c in "-_." else "_" for c in label.replace("/", "__")) or "model"
    return label if label.count("/") == 1 and all(label.split("/")) else f"local/{clean}"


def _general_metadata(name: str, path: Path, kind: str, main_score: str) -> dict:
    return dict(
        name=name,
        description=f"A {kind} task read from the local file {path.name} "
                    "(made by evaluation.benchmarks.mteb_eval).",
        reference=None,
        dataset={"path": str(path), "revision": "local"},
        type="Clustering" if kind == "clustering" else "STS",
        category="t2t",
        modalities=["text"],
        eval_splits=["test"],
        eval_langs=["eng-Latn"],
        main_score=main_score,
        date=None,
        domains=None,
        task_subtypes=None,
        license=None,
        annotations_creators=None,
        dialect=None,
        sample_creation=None,
        bibtex_citation="",
    )


def local_task(path: str | Path, sts_range: tuple[float, float] = (0.0, 5.0)):
    """An MTEB task made from a local table (see the module docstring for the columns)."""
    _import_mteb()
    from datasets import Dataset, DatasetDict
    from mteb.abstasks.clustering import AbsTaskClustering
    from mteb.abstasks.sts import AbsTaskSTS
    from mteb.abstasks.task_metadata import TaskMetadata

    from datamodules.table_reader import read_table

    path = Path(path)
    table = read_table(path)
    columns = set(table.columns)
    stem = "".join(c if c.isalnum() or c in "-_" else "_" for c in path.stem)
    if {"text", "label"} <= columns:
        rows = table.dropna(subset=["text", "label"])
        if rows.empty or rows["label"].nunique() < 2:
            raise ConfigError(f"'{path}': a local MTEB clustering task needs rows with at least two distinct labels.")
        labels = {name: i for i, name in enumerate(sorted(rows["label"].unique()))}
        data = {"sentences": rows["text"].tolist(), "labels": [labels[v] for v in rows["label"]]}

        class LocalClustering(AbsTaskClustering):
            # embed every text once; MTEB's sub-sampled k-means experiments then run on them
            max_fraction_of_documents_to_embed = None
            metadata = TaskMetadata(**_general_metadata(f"{LOCAL_PREFIXES['clustering']}.{stem}", path,
                                                        "clustering", "v_measure"))

            def load_data(self, num_proc=None, **kwargs):
                self.dataset = DatasetDict({"test": Dataset.from_dict(data)})
                self.data_loaded = True

        return LocalClustering()
    if {"sentence1", "sentence2", "score"} <= columns:
        rows = table.dropna(subset=["sentence1", "sentence2", "score"])
        try:
            scores = rows["score"].astype(float).tolist()
        except ValueError as err:
            raise ConfigError(f"'{path}': the score column must hold numbers ({err}).") from None
        data = {"sentence1": rows["sentence1"].tolist(), "sentence2": rows["sentence2"].tolist(), "score": scores}

        class LocalSTS(AbsTaskSTS):
            min_score, max_score = sts_range
            metadata = TaskMetadata(**_general_metadata(f"{LOCAL_PREFIXES['sts']}.{stem}", path, "sts",
                                                        "cosine_spearman"))

            def load_data(self, num_proc=None, **kwargs):
                self.dataset = DatasetDict({"test": Dataset.from_dict(data)})
                self.data_loaded = True

        return LocalSTS()
    raise ConfigError(
        f"'{path}' has columns {sorted(columns)}; a local MTEB task needs `text` and `label` (clustering) or "
        "`sentence1`, `sentence2` and `score` (STS). Rename the columns, or name an MTEB task instead."
    )


def parse_range(text: str) -> tuple[float, float]:
    """``"0:5"`` -> (0.0, 5.0): the score range of a local STS table."""
    try:
        lo, hi = (float(x) for x in str(text).split(":"))
    except ValueError:
        raise ConfigError(f"score range '{text}' must be lo:hi, e.g. 0:5") from None
    if not lo < hi:
        raise ConfigError(f"score range '{text}': lo must be below hi")
    return lo, hi


def resolve_tasks(names: Sequence[str], sts_range: tuple[float, float] = (0.0, 5.0)) -> list:
    """MTEB task objects for ``names``: MTEB task names, or paths of local tables."""
    mteb = _import_mteb()
    if not names:
        raise ConfigError("--tasks mteb needs --mteb-tasks: MTEB task names (e.g. STS12,SciDocsRR) or local files.")
    tasks, hub_names = [], []
    for name in names:
        if Path(name).is_file():
            tasks.append(local_task(name, sts_range))
        elif Path(name).suffix.lower() in FORMATS:  # the extensions of a data file
            raise ConfigError(f"MTEB task '{name}' looks like a file but does not exist.")
        else:
            hub_names.append(name)
    if hub_names:
        known = {t.metadata.name for t in mteb.get_tasks()}
        unknown = [n for n in hub_names if n not in known]
        if unknown:
            import difflib

            hints = {n: difflib.get_close_matches(n, known, n=3) for n in unknown}
            raise ConfigError(
                "unknown MTEB task(s): " + "; ".join(
                    f"{n}" + (f" (did you mean {', '.join(h)}?)" if h else "") for n, h in hints.items())
                + ". `python -c \"import mteb; print(*sorted(t.metadata.name for t in mteb.get_tasks()))\"` "
                "lists them all."
            )
        tasks += list(mteb.get_tasks(tasks=hub_names))
    return tasks


def _dataset_is_cached(path: str, revision: str | None) -> bool:
    from huggingface_hub import snapshot_download

    try:
        snapshot_download(repo_id=path, repo_type="dataset", revision=revision, local_files_only=True)
    except Exception:  # noqa: BLE001 - any failure means: not usable offline
        return False
    return True


def _hub_reachable(path: str, timeout: float = 5.0) -> str | None:
    """None when the Hub answers for ``path``; otherwise why not, in a few words."""
    if os.environ.get("HF_HUB_OFFLINE") == "1":
        return "HF_HUB_OFFLINE=1 is set"
    from huggingface_hub import HfApi

    try:
        HfApi().dataset_info(path, timeout=timeout)
    except Exception as err:  # noqa: BLE001 - the reason goes into the message
        return f"{type(err).__name__}: {str(err).strip().splitlines()[0][:120] if str(err).strip() else ''}"
    return None


def check_data_available(tasks: Sequence) -> None:
    """Stop with one message when a Hub task's dataset is neither cached nor downloadable."""
    missing = []
    for task in tasks:
        if task.metadata.name.startswith(tuple(LOCAL_PREFIXES.values())):
            continue
        dataset = task.metadata.dataset or {}
        path, revision = dataset.get("path"), dataset.get("revision")
        if not path or _dataset_is_cached(path, revision):
            continue
        reason = _hub_reachable(path)
        if reason:
            missing.append(f"{task.metadata.name} (Hub dataset {path}, revision {revision}; {reason})")
    if missing:
        raise MtebUnavailableError(
            "MTEB cannot load " + "; ".join(missing) + ". The data of MTEB's tasks comes from the Hugging Face "
            "Hub: run once where there is network (the datasets stay in the Hugging Face cache, HF_HOME) or copy "
            "that cache here; a local table can be a task too (--mteb-tasks my_texts.csv, see docs/evaluation.md)."
        )


def _main_scores(task_result) -> dict:
    """{split/subset: main score} of one ``mteb.TaskResult``."""
    out = {}
    for split, entries in task_result.scores.items():
        for entry in entries:
            key = split if entry.get("hf_subset", "default") == "default" else f"{split}/{entry['hf_subset']}"
            out[key] = float(entry["main_score"])
    return out


def evaluate_mteb(
    encode: Encode,
    task_names: Sequence[str],
    out_dir: str | Path,
    model_label: str,
    embed_dim: int | None = None,
    max_tokens: int | None = None,
    batch_size: int = 128,
    sts_range: tuple[float, float] = (0.0, 5.0),
    log: Callable[[str], None] | None = None,
) -> dict:
    """Run the MTEB tasks ``task_names`` on the embeddings of ``encode``; MTEB's files go under ``out_dir``.

    Returns ``{"protocol", "mteb_version", "results_folder", "tasks": {name: {"type", "main_score_name",
    "main_score", "splits"}}, "avg"}``, scores as fractions (MTEB's own scale).
    """
    mteb = _import_mteb()
    tasks = resolve_tasks(task_names, sts_range)
    check_data_available(tasks)
    model = make_encoder(encode, mteb_model_name(model_label), embed_dim, max_tokens)
    folder = Path(out_dir)
    folder.mkdir(parents=True, exist_ok=True)
    if log:
        log(f"mteb: {len(tasks)} task(s) with mteb {mteb_version()}: {', '.join(t.metadata.name for t in tasks)}")
    mteb_logger = logging.getLogger("mteb")
    level = mteb_logger.level
    mteb_logger.setLevel(logging.WARNING)  # its per-phase INFO lines would bury the run's own log
    try:
        result = mteb.evaluate(
            model,
            tasks,
            cache=mteb.ResultCache(cache_path=folder),
            overwrite_strategy="always",
            encode_kwargs={"batch_size": batch_size, "show_progress_bar": False},
            show_progress_bar=False,
        )
    finally:
        mteb_logger.setLevel(level)
    by_name = {t.metadata.name: t for t in tasks}
    table = {}
    for task_result in result.task_results:
        meta = by_name[task_result.task_name].metadata
        splits = _main_scores(task_result)
        table[task_result.task_name] = {
            "type": meta.type,
            "main_score_name": meta.main_score,
            "main_score": float(np.mean(list(splits.values()))) if splits else None,
            "splits": splits,
        }
        if log:
            log(f"mteb: {task_result.task_name} {meta.main_score} {table[task_result.task_name]['main_score']:.4f}")
    scores = [r["main_score"] for r in table.values() if r["main_score"] is not None]
    return {
        "protocol": f"{PROTOCOL} (mteb {mteb_version()}, each task's main score)",
        "mteb_version": mteb_version(),
        "results_folder": str(folder / "results"),
        "tasks": table,
        "avg": float(np.mean(scores)) if scores else None,
    }


def markdown_table(result: dict, label: str) -> str:
    rows = ["| task | type | main score | " + label + " |", "|---|---|---|---|"]
    for name, r in result["tasks"].items():
        value = "-" if r["main_score"] is None else f"{100 * r['main_score']:.2f}"
        rows.append(f"| {name} | {r['type']} | {r['main_score_name']} | {value} |")
    if result.get("avg") is not None and len(result["tasks"]) > 1:
        rows.append(f"| average ({len(result['tasks'])} tasks) | | | {100 * result['avg']:.2f} |")
    return "\n".join(rows) + f"\n\nMTEB's result files: `{result['results_folder']}`.\n"
