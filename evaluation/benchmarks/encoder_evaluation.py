"""One model on the clustering, STS, transfer, MTEB and few-shot task groups: the result, its Markdown
table, and headline rows to compare several results (``evaluate_model``'s library, also the
end-of-training evaluation's)."""
from __future__ import annotations

import contextlib
import json
import re
import time
from pathlib import Path
from typing import Callable, Sequence

import numpy as np

from evaluation.benchmarks.clustering_tasks import (
    BENCHMARKS,
    CLUSTERING_PROTOCOLS,
    CONF_DATASETS,
    DATA,
    SHORT_NAMES,
    clustering_markdown,
    clustering_sets,
    evaluate_clustering,
)
from evaluation.clustering import catalogue
from textcore.errors import ConfigError

TASKS = ("clustering", "sts", "transfer", "mteb", "few_shot")
DEFAULT_TASKS = ("clustering", "sts")

@contextlib.contextmanager
def max_length(encoder, length: int | None):
    """Temporarily change the encoder's token limit (None: the backbone's position limit)."""
    saved = encoder.max_length
    if length is None:
        length = min(int(encoder.tokenizer.model_max_length), int(encoder.backbone.config.max_position_embeddings))
    encoder.max_length = length
    try:
        yield
    finally:
        encoder.max_length = saved


def sts_part(result: dict, encoder, encode, senteval_dir, length: int | None, log) -> None:
    """``result["sts"]`` (or a note that the STS data is missing) at the token limit ``length``."""
    from evaluation.benchmarks.sts import evaluate_sts

    try:
        with max_length(encoder, length):
            result["sts"] = evaluate_sts(encode, senteval_dir, log=log)
            result["sts"]["max_length"] = encoder.max_length
    except FileNotFoundError as missing:
        result["notes"].append(f"sts skipped: {missing}")
    else:
        result["notes"] += [f"sts: {t} skipped ({w})" for t, w in result["sts"]["skipped"].items()]


def senteval_part(result: dict, task: str, encoder, encode, senteval_dir, length: int, log,
                  options: dict | None) -> None:
    """``result[task]`` for SentEval's ``transfer`` or ``few_shot`` tasks at the token limit ``length``, with a note
    for each task whose data is missing."""
    if task == "transfer":
        from evaluation.benchmarks.transfer import evaluate_transfer

        with max_length(encoder, length):
            result[task] = evaluate_transfer(encode, senteval_dir, **(options or {}))
    else:
        from evaluation.benchmarks.senteval.few_shot import evaluate_few_shot

        with max_length(encoder, length):
            result[task] = evaluate_few_shot(encode, senteval_dir, log=log, **(options or {}))
    result[task]["max_length"] = length
    result["notes"] += [f"{task}: {t} skipped ({r['skipped']})" for t, r in result[task]["tasks"].items()
                        if "skipped" in r]


def mteb_part(result: dict, encoder, encode, mteb_options: dict | None, batch_size: int, log) -> None:
    """The MTEB task at the encoder's own token limit (or ``mteb_options['max_length']``)."""
    from evaluation.benchmarks.mteb_eval import evaluate_mteb

    options = dict(mteb_options or {})
    length = options.pop("max_length", None) or encoder.max_length
    with max_length(encoder, length):
        result["mteb"] = evaluate_mteb(
            encode, options.pop("tasks", ()), options.pop("out_dir", "outputs/evaluation/mteb"),
            options.pop("label", "model"), max_tokens=length, batch_size=batch_size, log=log, **options)
    result["mteb"]["max_length"] = length


def _embedding_cache(encoder, pooling: str, backend: str, backend_cache, embedding_cache, batch_size: int):
    """The one cache every task embeds through, by the torch encoder or the backend's export."""
    from evaluation.model_io.embedding_cache import EmbeddingCache

    embedder = None
    if backend != "torch":
        from textcore.encoding.onnx_runtime import embedder as backend_embedder

        embedder = backend_embedder(encoder, pooling, backend, backend_cache)
    return EmbeddingCache(encoder, embedding_cache, batch_size, embedder)


def evaluate_encoder(
    encoder,
    pooling: str,
    tasks: Sequence[str] = DEFAULT_TASKS,
    short_text_dir: str | Path = DATA / "short_text",
    senteval_dir: str | Path = DATA / "senteval" / "downstream",
    seeds: int = 10,
    clustering_names: Sequence[str] = BENCHMARKS,
    clustering_max_length: int = 32,
    sts_max_length: int | None = None,
    transfer_max_length: int = 128,
    transfer_options: dict | None = None,
    batch_size: int = 128,
    log: Callable[[str], None] | None = None,
    conf_dir: Path = CONF_DATASETS,
    encoding: str | None = None,
    kmeans_backend: str | None = None,
    kmeans_n_init: int = 10,
    embedding_cache: str | Path | None = None,
    mteb_options: dict | None = None,
    few_shot_options: dict | None = None,
    backend: str = "torch",
    backend_cache: str | Path | None = None,
) -> dict:
    """Run the requested evaluations of ``encoder`` (a ``TextEncoder``) with ``pooling``.

    Every text is embedded once per token limit (``evaluation.model_io.embedding_cache.EmbeddingCache``;
    ``embedding_cache``: a folder that keeps the embeddings for later runs of the same weights).
    KMeans: ``kmeans_backend`` (needed with the clustering task) and ``kmeans_n_init`` (see ``evaluate_clustering``).

    Token limits: 32 for clustering (the papers' training length), the backbone's limit for STS
    (as ``evaluation.benchmarks.sts``: SimCSE does not truncate) and 128 for transfer (as
    ``evaluation.benchmarks.transfer``). A task whose data folder is absent is noted, not fatal.

    ``mteb_options`` (task ``mteb``): ``tasks`` (MTEB names or local tables), ``out_dir`` (MTEB's result
    files), ``label``, ``max_length`` (default: the encoder's own, i.e. the run's), ``sts_range``.

    ``backend``: what embeds the texts of the clustering, STS, transfer and few-shot tasks (``torch``, ``onnx``,
    ``onnx-int8``: ``textcore.encoding.onnx_runtime``, the export cached in ``backend_cache``); MTEB runs the
    torch encoder.
    """
    unknown = [t for t in tasks if t not in TASKS]
    if unknown:
        raise ConfigError(f"unknown task(s) {unknown}; choose from {TASKS}")

    cache = _embedding_cache(encoder, pooling, backend, backend_cache, embedding_cache, batch_size)

    def encode(texts: list[str]) -> np.ndarray:
        return cache.encode(texts, pooling)

    result: dict = {"pooling": pooling, "notes": [], "seconds": {}, "backend": backend}
    for task in tasks:
        start = time.perf_counter()
        if task == "clustering":
            sets = clustering_sets(short_text_dir, clustering_names, conf_dir, encoding)
            with max_length(encoder, clustering_max_length):
                result["clustering"] = evaluate_clustering(
                    encode, sets, tuple(range(seeds)), log, kmeans_backend=kmeans_backend, kmeans_n_init=kmeans_n_init
                )
            result["clustering"]["max_length"] = clustering_max_length
            result["notes"] += [f"clustering: {n} skipped ({w})" for n, w in result["clustering"]["skipped"].items()]
        elif task == "sts":
            sts_part(result, encoder, encode, senteval_dir, sts_max_length, log)
        elif task in ("transfer", "few_shot"):
            senteval_part(result, task, encoder, encode, senteval_dir, transfer_max_length, log,
                          transfer_options if task == "transfer" else few_shot_options)
        elif task == "mteb":
            mteb_part(result, encoder, encode, mteb_options, batch_size, log)
        result["seconds"][task] = round(time.perf_counter() - start, 1)
    return result


def to_markdown(result: dict, label: str) -> str:
    from evaluation.benchmarks.sts import markdown_table as sts_markdown
    from evaluation.benchmarks.transfer import to_markdown as transfer_markdown

    parts = [f"# Evaluation of {label}", "", f"Pooling: `{result['pooling']}`. Date: {result.get('date', '-')}.", ""]
    if "clustering" in result:
        protocol = result["clustering"].get("protocol", "pairsupcon")
        title = "PairSupCon protocol" if protocol == "pairsupcon" else "ClusterNS Table 6 protocol"
        parts += [f"## Clustering ({title})", "", CLUSTERING_PROTOCOLS[protocol] + ".", "",
                  clustering_markdown(result["clustering"], label)]
    if "sts" in result:
        parts += ["## STS (cosine similarity, SimCSE's protocol)", "", sts_markdown(result["sts"], label)]
    if "transfer" in result:
        title = f"Transfer (SentEval tasks, protocol {result['transfer'].get('protocol', 'sklearn')})"
        parts += [transfer_markdown(result["transfer"], title).replace("# Transfer", "## Transfer", 1)]
    if "few_shot" in result:
        from evaluation.benchmarks.senteval.few_shot import markdown_table as few_shot_markdown

        parts += ["## Few-shot transfer (PairSupCon Table 6 protocol)", "",
                  few_shot_markdown(result["few_shot"], label)]
    if "mteb" in result:
        from evaluation.benchmarks.mteb_eval import markdown_table as mteb_markdown

        parts += [f"## {result['mteb']['protocol']}", "", f"Token limit {result['mteb']['max_length']}.", "",
                  mteb_markdown(result["mteb"], label)]
    if result.get("notes"):
        parts += ["## Notes", ""] + [f"- {n}" for n in result["notes"]] + [""]
    parts += ["Wall time per task (s): " + ", ".join(f"{t} {s}" for t, s in result["seconds"].items()), ""]
    return "\n".join(parts)


def model_slug(model_ref: str) -> str:
    """A file name for a model reference: ``minilm``, ``logs_train_runs_pairsupcon_nli_<time>``..."""
    path = Path(model_ref)
    if path.exists():
        parts = [p for p in path.resolve().parts if p not in ("/", "")]
        keep = parts[-3:] if path.suffix == ".ckpt" else parts[-2:]
        model_ref = "_".join(keep)
    slug = re.sub(r"[^A-Za-z0-9._-]+", "_", model_ref).strip("_.")
    return slug[-100:] or "model"


# --------------------------------------------------------------------------------- comparison


def headline_rows(result: dict) -> dict[str, float | None]:
    """Flat {row name: value x100} of the numbers worth comparing across models."""
    rows: dict[str, float | None] = {}
    clustering = result.get("clustering")
    if clustering:
        for metric in catalogue.paper_names():
            for name in BENCHMARKS:
                if name in clustering["datasets"]:
                    rows[f"clustering {metric.upper()} {SHORT_NAMES[name]}"] = (
                        100 * clustering["datasets"][name][metric]
                    )
            avg = clustering["avg"][metric]
            rows[f"clustering {metric.upper()} avg ({len(clustering['avg_over'])} sets)"] = (
                None if avg is None else 100 * avg
            )
    sts = result.get("sts")
    if sts:
        for task, r in sts["tasks"].items():
            rows[f"STS {task}"] = 100 * r["spearman"]
        rows[f"STS avg ({len(sts['avg_over'])} tasks)"] = 100 * sts["avg"]
    transfer = result.get("transfer")
    if transfer:
        protocol = transfer.get("protocol", "sklearn")  # results written before protocols were named: sklearn
        for task, r in transfer["tasks"].items():
            if "acc" in r:
                rows[f"transfer {task} ({protocol})"] = r["acc"]
        if transfer.get("avg") is not None:
            rows[f"transfer avg ({len(transfer['avg_over'])} tasks, {protocol})"] = transfer["avg"]
    few_shot = result.get("few_shot")
    if few_shot:
        for task, r in few_shot["tasks"].items():
            if "acc" in r:
                rows[f"few-shot {task} ({few_shot['k']} per class)"] = r["acc"]
    mteb = result.get("mteb")
    if mteb:
        for task, r in mteb["tasks"].items():
            rows[f"MTEB {task} ({r['main_score_name']})"] = None if r["main_score"] is None else 100 * r["main_score"]
    return rows


def compare(results: Sequence[dict], labels: Sequence[str]) -> str:
    """Markdown table, one column per model, one row per headline number (missing: '-')."""
    per_model = [headline_rows(r) for r in results]
    names = list(dict.fromkeys(k for rows in per_model for k in rows))
    lines = ["| | " + " | ".join(labels) + " |", "|" + "---|" * (len(labels) + 1)]
    for name in names:
        cells = [rows.get(name) for rows in per_model]
        lines.append(f"| {name} | " + " | ".join("-" if v is None else f"{v:.2f}" for v in cells) + " |")
    return "\n".join(lines) + "\n"


def compare_files(paths: Sequence[str | Path]) -> str:
    results = [json.loads(Path(p).read_text()) for p in paths]
    labels = [r.get("label") or Path(p).stem for r, p in zip(results, paths)]
    return compare(results, labels)


def write_outputs(result: dict, out_dir: str | Path, stem: str, label: str) -> tuple[Path, Path]:
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    md_path, json_path = out_dir / f"{stem}.md", out_dir / f"{stem}.json"
    md_path.write_text(to_markdown(result, label), encoding="utf-8")
    json_path.write_text(json.dumps(result, indent=2, default=str), encoding="utf-8")
    return md_path, json_path
