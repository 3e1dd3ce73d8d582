"""Evaluate any model on clustering, STS and transfer from one command (docs/evaluation.md).

    python -m evaluation.evaluate_model --model <run dir | .ckpt | folder | Hub name | minilm>
        [--tasks clustering,sts,transfer,mteb] [--mteb-tasks STS12,my.csv] [--out DIR] [--seeds 10]
        [--short-text-dir ../shared/data/short_text] [--senteval-dir ../shared/data/senteval/downstream]
    python -m evaluation.evaluate_model --compare a.json b.json ...

- clustering: the PairSupCon protocol (Table 1): embeddings from the model's evaluation pooling,
  KMeans with seeds 0..S-1 (``evaluation.metrics.kmeans_scores``), ACC and NMI mean (std) per
  dataset and their average. Each benchmark's file, text/label columns and number of clusters
  come from its Hydra config ``conf/dataset/<name>.yaml``; a dataset whose file is absent is
  skipped with a note.
- sts: ``evaluation.sts`` (Spearman of cosine similarity, no training: SimCSE's protocol; STS12-16
  'all' aggregation, STS-B and SICK-R test splits scored by cosine, not SentEval's supervised
  regressor).
- transfer: ``evaluation.transfer`` under ``--transfer-protocol`` (default ``senteval``: SentEval's
  PyTorch logistic regression, the papers' protocol; ``sklearn``: scikit-learn logistic
  regression; ``senteval-toolkit``: the installed SentEval package); slow on CPU, so not in the
  default task list. Tables and headline rows name the protocol.
- mteb: ``evaluation.mteb_eval`` runs the MTEB tasks named by ``--mteb-tasks`` (MTEB names or local
  tables) through the ``mteb`` package with this encoder; MTEB's result files go to ``<out>/mteb/``
  and the table is named after MTEB's protocol and version.

Writes ``<out>/<model slug>.md`` and ``.json``; ``--compare`` prints the headline numbers of
several such JSON files side by side.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import json
import re
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable, Sequence

import numpy as np

import run_folder
from errors import ConfigError, MissingFileError, exit_on_user_error
from lightning_modules.shared.kmeans import DEFAULT_KMEANS_BACKEND, KMEANS_BACKENDS

ROOT = Path(__file__).resolve().parents[1]
CONF_DATASETS = ROOT / "conf" / "dataset"
SHARED = ROOT.parent / "shared" / "data"
# PairSupCon Table 1 order and column names
BENCHMARKS = (
    "agnews",
    "searchsnippets",
    "stackoverflow",
    "biomedical",
    "tweet",
    "googlenews_ts",
    "googlenews_s",
    "googlenews_t",
)
SHORT_NAMES = {
    "agnews": "AG",
    "searchsnippets": "SS",
    "stackoverflow": "SO",
    "biomedical": "Bio",
    "tweet": "Tweet",
    "googlenews_ts": "G-TS",
    "googlenews_s": "G-S",
    "googlenews_t": "G-T",
}
TASKS = ("clustering", "sts", "transfer", "mteb", "few_shot")
# clustering protocols: the papers' ways of turning a model into cluster assignments
CLUSTERING_PROTOCOLS = {
    "pairsupcon": "PairSupCon protocol (Table 1): the model's evaluation pooling, 32 tokens, KMeans seeds 0..S-1",
    "clusterns": "ClusterNS Table 6 protocol: the raw [CLS] state, 128 tokens, one scikit-learn KMeans per set "
                 "(seed 0, 10 restarts; the authors' cluster_eval.py left the seed unset)",
}
DEFAULT_TASKS = ("clustering", "sts")

Encode = Callable[[list[str]], np.ndarray]


@dataclass
class ClusteringSet:
    """One clustering benchmark: where its texts are and how many clusters KMeans gets."""

    name: str
    path: Path
    text_column: str
    label_column: str
    num_clusters: int | None  # None: the number of distinct labels
    encoding: str = "utf-8"  # the file's text encoding (dataset.encoding, or --encoding)


def dataset_config(name: str, conf_dir: Path = CONF_DATASETS):
    """``conf/dataset/<name>.yaml`` merged over the configs in its ``defaults`` list, unresolved.

    Read with OmegaConf rather than Hydra's compose so that it also works inside a running
    Hydra application (the end-of-training callback).
    """
    from omegaconf import OmegaConf

    path = conf_dir / f"{name}.yaml"
    if not path.is_file():
        known = sorted(p.stem for p in conf_dir.glob("*.yaml"))
        raise MissingFileError(f"No dataset config '{path}'; known datasets: {known}.")
    cfg = OmegaConf.load(path)
    merged = OmegaConf.create()
    for parent in cfg.pop("defaults", []) or []:
        if isinstance(parent, str) and parent != "_self_":
            merged = OmegaConf.merge(merged, dataset_config(parent, conf_dir))
    return OmegaConf.merge(merged, cfg)


def clustering_set(
    name: str, data_dir: str | Path, conf_dir: Path = CONF_DATASETS, encoding: str | None = None
) -> ClusteringSet:
    cfg = dataset_config(name, conf_dir)
    for key in ("file", "text_column", "num_clusters"):
        if key not in cfg:
            raise ConfigError(f"{conf_dir / (name + '.yaml')}: missing key '{key}' needed for clustering evaluation.")
    return ClusteringSet(
        name=name,
        path=Path(data_dir) / cfg.file,
        text_column=cfg.text_column,
        label_column=cfg.get("label_column") or "label",
        num_clusters=cfg.num_clusters,
        encoding=encoding or cfg.get("encoding") or "utf-8",
    )


def clustering_sets(
    data_dir: str | Path, names: Iterable[str] = BENCHMARKS, conf_dir: Path = CONF_DATASETS,
    encoding: str | None = None,
) -> list[ClusteringSet]:
    return [clustering_set(name, data_dir, conf_dir, encoding) for name in names]


def evaluate_clustering(
    encode: Encode,
    sets: Sequence[ClusteringSet],
    seeds: Sequence[int] = tuple(range(10)),
    log: Callable[[str], None] | None = None,
    kmeans_backend: str | None = None,
    kmeans_n_init: int = 10,
) -> dict:
    """KMeans with each seed on each set's embeddings; mean and std of ACC/NMI/ARI/AMI (x1).

    ``kmeans_backend`` (``lightning_modules.shared.kmeans.KMEANS_BACKENDS``; None: the default) and
    ``kmeans_n_init`` (restarts per seed) go to ``lightning_modules.shared.kmeans.kmeans_fit``.

    Returns ``{"datasets": {name: {acc, acc_std, nmi, nmi_std, ari, ..., n, k, seconds}},
    "avg": {acc, nmi}, "avg_over": [...], "skipped": {name: reason}, "seeds": [...]}``.
    """
    from datamodules.short_text import load_corpus
    from evaluation.metrics import kmeans_scores
    from lightning_modules.shared.kmeans import resolve_kmeans_backend

    backend = resolve_kmeans_backend(kmeans_backend)
    kmeans = {"backend": backend, "n_init": kmeans_n_init}
    out: dict = {"datasets": {}, "skipped": {}, "seeds": list(seeds), "kmeans": kmeans}
    for entry in sets:
        if not entry.path.is_file():
            out["skipped"][entry.name] = f"{entry.path} not found"
            if log:
                log(f"clustering: {entry.name} skipped ({entry.path} not found)")
            continue
        start = time.perf_counter()
        corpus = load_corpus(entry.path, entry.text_column, entry.label_column, encoding=entry.encoding)
        if corpus.labels is None:
            raise ConfigError(
                f"{entry.path}: no label column '{entry.label_column}'; clustering evaluation needs labels."
            )
        k = entry.num_clusters or len(np.unique(corpus.labels))
        embeddings = encode(corpus.texts)  # [n, d]; a sparse [n, V] for the bag-of-words baselines
        sparse_rows = hasattr(embeddings, "tocsr")
        if not sparse_rows:
            embeddings = np.asarray(embeddings, dtype=np.float32)
        embed_seconds = time.perf_counter() - start
        if embeddings.shape[0] != len(corpus.texts):
            raise ValueError(
                f"encode returned {embeddings.shape[0]} rows for {len(corpus.texts)} texts of {entry.path}"
            )
        if sparse_rows:
            from evaluation.metrics import sparse_kmeans_scores

            out["kmeans"] = {"backend": "sklearn (sparse)", "n_init": kmeans_n_init}
            scores = sparse_kmeans_scores(embeddings, corpus.labels, k, seeds=seeds, n_init=kmeans_n_init)
        else:
            scores = kmeans_scores(embeddings, corpus.labels, k, seeds=seeds, backend=backend, n_init=kmeans_n_init)
        out["datasets"][entry.name] = {
            **scores,
            "n": len(corpus.texts),
            "k": int(k),
            "seconds": round(time.perf_counter() - start, 1),
            "embed_seconds": round(embed_seconds, 1),
        }
        if log:
            log(
                f"clustering: {entry.name} ACC {100 * scores['acc']:.2f} ({100 * scores['acc_std']:.2f}) "
                f"NMI {100 * scores['nmi']:.2f} ({time.perf_counter() - start:.0f}s, embedding {embed_seconds:.0f}s)"
            )
    done = list(out["datasets"])
    out["avg_over"] = done
    out["avg"] = {m: float(np.mean([out["datasets"][d][m] for d in done])) if done else None for m in ("acc", "nmi")}
    return out


def clustering_markdown(result: dict, label: str) -> str:
    """PairSupCon Table 1 layout: one row each for ACC and NMI, mean (std) x100."""
    names = [n for n in BENCHMARKS if n in result["datasets"]] + [n for n in result["datasets"] if n not in BENCHMARKS]
    heads = [SHORT_NAMES.get(n, n) for n in names]
    avg_name = "Avg." if len(names) == len(BENCHMARKS) else f"Avg. ({len(names)} sets)"
    lines = [
        f"KMeans on embeddings, seeds {result['seeds'][0]}..{result['seeds'][-1]} ({len(result['seeds'])} runs, "
        f"{kmeans_description(result.get('kmeans'))} each): mean (std) x100.",
        "",
        "| Model | Metric | " + " | ".join(heads) + f" | {avg_name} |",
        "|" + "---|" * (len(names) + 3),
    ]
    for metric in ("acc", "nmi"):
        cells = [
            f"{100 * result['datasets'][n][metric]:.2f} ({100 * result['datasets'][n][metric + '_std']:.2f})"
            for n in names
        ]
        avg = result["avg"][metric]
        lines.append(
            f"| {label} | {metric.upper()} | "
            + " | ".join(cells)
            + f" | {'-' if avg is None else f'{100 * avg:.2f}'} |"
        )
    if result["skipped"]:
        lines += ["", "Skipped (data missing): " + ", ".join(f"{n} ({why})" for n, why in result["skipped"].items())]
    return "\n".join(lines) + "\n"


def kmeans_description(kmeans: dict | None) -> str:
    """'fast float32, 10 restarts' for a result's ``kmeans`` entry (older results name none: sklearn float64)."""
    if not kmeans:
        return "sklearn float64 n_init=10"
    if kmeans["backend"].endswith("(sparse)"):
        return f"{kmeans['backend']} float64, {kmeans['n_init']} restarts"
    return f"{kmeans['backend']} float32, {kmeans['n_init']} restarts"


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


def evaluate_encoder(
    encoder,
    pooling: str,
    tasks: Sequence[str] = DEFAULT_TASKS,
    short_text_dir: str | Path = SHARED / "short_text",
    senteval_dir: str | Path = SHARED / "senteval" / "downstream",
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
) -> dict:
    """Run the requested evaluations of ``encoder`` (a ``TextEncoder``) with ``pooling``.

    Every text is embedded once per token limit (``evaluation.embedding_cache.EmbeddingCache``;
    ``embedding_cache``: a folder that keeps the embeddings for later runs of the same weights).
    KMeans: ``kmeans_backend`` and ``kmeans_n_init`` (see ``evaluate_clustering``).

    Token limits: 32 for clustering (the papers' training length), the backbone's limit for STS
    (as ``evaluation.sts``: SimCSE does not truncate) and 128 for transfer (as
    ``evaluation.transfer``). A task whose data folder is absent is noted, not fatal.

    ``mteb_options`` (task ``mteb``): ``tasks`` (MTEB names or local tables), ``out_dir`` (MTEB's result
    files), ``label``, ``max_length`` (default: the encoder's own, i.e. the run's), ``sts_range``.
    """
    unknown = [t for t in tasks if t not in TASKS]
    if unknown:
        raise ConfigError(f"unknown task(s) {unknown}; choose from {TASKS}")

    from evaluation.embedding_cache import EmbeddingCache

    cache = EmbeddingCache(encoder, embedding_cache, batch_size)

    def encode(texts: list[str]) -> np.ndarray:
        return cache.encode(texts, pooling)

    result: dict = {"pooling": pooling, "notes": [], "seconds": {}}
    for task in tasks:
        start = time.perf_counter()
        if task == "clustering":
            sets = clustering_sets(short_text_dir, clustering_names, conf_dir, encoding)
            with max_length(encoder, clustering_max_length):
                result["clustering"] = evaluate_clustering(
                    encode, sets, tuple(range(seeds)), log, kmeans_backend, kmeans_n_init
                )
            result["clustering"]["max_length"] = clustering_max_length
            result["notes"] += [f"clustering: {n} skipped ({w})" for n, w in result["clustering"]["skipped"].items()]
        elif task == "sts":
            from evaluation.sts import evaluate_sts

            try:
                with max_length(encoder, sts_max_length):
                    result["sts"] = evaluate_sts(encode, senteval_dir, log=log)
                    result["sts"]["max_length"] = encoder.max_length
            except FileNotFoundError as missing:
                result["notes"].append(f"sts skipped: {missing}")
            else:
                result["notes"] += [f"sts: {t} skipped ({w})" for t, w in result["sts"]["skipped"].items()]
        elif task == "transfer":
            from evaluation.transfer import evaluate_transfer

            with max_length(encoder, transfer_max_length):
                result["transfer"] = evaluate_transfer(encode, senteval_dir, **(transfer_options or {}))
            result["transfer"]["max_length"] = transfer_max_length
            result["notes"] += [
                f"transfer: {t} skipped ({r['skipped']})"
                for t, r in result["transfer"]["tasks"].items()
                if "skipped" in r
            ]
        elif task == "few_shot":
            from evaluation.few_shot import evaluate_few_shot

            options = dict(few_shot_options or {})
            with max_length(encoder, transfer_max_length):
                result["few_shot"] = evaluate_few_shot(encode, senteval_dir, log=log, **options)
            result["few_shot"]["max_length"] = transfer_max_length
            result["notes"] += [f"few_shot: {t} skipped ({r['skipped']})"
                                for t, r in result["few_shot"]["tasks"].items() if "skipped" in r]
        elif task == "mteb":
            from evaluation.mteb_eval import evaluate_mteb

            options = dict(mteb_options or {})
            length = options.pop("max_length", None) or encoder.max_length
            with max_length(encoder, length):
                result["mteb"] = evaluate_mteb(
                    encode, options.pop("tasks", ()), options.pop("out_dir", "outputs/evaluation/mteb"),
                    options.pop("label", "model"), max_tokens=length, batch_size=batch_size, log=log, **options)
            result["mteb"]["max_length"] = length
        result["seconds"][task] = round(time.perf_counter() - start, 1)
    return result


def to_markdown(result: dict, label: str) -> str:
    from evaluation.sts import markdown_table as sts_markdown
    from evaluation.transfer import to_markdown as transfer_markdown

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
        from evaluation.few_shot import markdown_table as few_shot_markdown

        parts += ["## Few-shot transfer (PairSupCon Table 6 protocol)", "",
                  few_shot_markdown(result["few_shot"], label)]
    if "mteb" in result:
        from evaluation.mteb_eval import markdown_table as mteb_markdown

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
        for metric in ("acc", "nmi"):
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


# --------------------------------------------------------------------------------- CLI


def is_run_reference(model_ref: str) -> bool:
    """A checkpoint or a run folder of this project (its encoder carries the run's max_length)."""
    path = Path(model_ref)
    return path.suffix == ".ckpt" or (path.is_dir() and (path / run_folder.CONFIG).is_file())


def write_outputs(result: dict, out_dir: str | Path, stem: str, label: str) -> tuple[Path, Path]:
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    md_path, json_path = out_dir / f"{stem}.md", out_dir / f"{stem}.json"
    md_path.write_text(to_markdown(result, label), encoding="utf-8")
    json_path.write_text(json.dumps(result, indent=2, default=str), encoding="utf-8")
    return md_path, json_path


def evaluate_baseline(args, tasks: Sequence[str], label: str, log, start: float) -> dict:
    """``--model tfidf`` / ``--model bow``: the bag-of-words clustering rows (``evaluation.bow_baseline``)."""
    from evaluation.bow_baseline import DESCRIPTIONS, features

    if list(tasks) != ["clustering"]:
        raise ConfigError(f"--model {args.model} is a clustering baseline: use --tasks clustering "
                          f"(got {','.join(tasks)})")
    sets = clustering_sets(args.short_text_dir, [d.strip() for d in args.datasets.split(",") if d.strip()],
                           encoding=args.encoding)
    result: dict = {"pooling": args.model, "notes": [DESCRIPTIONS[args.model]], "seconds": {}}
    result["clustering"] = evaluate_clustering(features(args.model), sets, tuple(range(args.seeds)), log,
                                               kmeans_n_init=args.kmeans_n_init)
    result["clustering"]["max_length"] = None
    result["notes"] += [f"clustering: {n} skipped ({w})" for n, w in result["clustering"]["skipped"].items()]
    result["seconds"]["clustering"] = round(time.perf_counter() - start, 1)
    result.update(model=args.model, label=label, date=dt.date.today().isoformat(),
                  wall_seconds=round(time.perf_counter() - start, 1), short_text_dir=str(args.short_text_dir))
    md_path, json_path = write_outputs(result, args.out, label, label)
    print(md_path.read_text())
    print(f"wrote {md_path} and {json_path} ({result['wall_seconds']} s)", file=sys.stderr)
    return result


@exit_on_user_error
def main(argv: Sequence[str] | None = None) -> dict | str:
    parser = argparse.ArgumentParser(prog="python -m evaluation.evaluate_model", description=__doc__.split("\n")[0])
    parser.add_argument("--model", help="run dir, .ckpt, sentence-transformers/HF folder, Hub name, minilm or tiny; "
                        "tfidf or bow: the bag-of-words clustering baselines")
    parser.add_argument(
        "--compare", nargs="+", metavar="JSON", help="print a side-by-side table of result files and exit"
    )
    parser.add_argument("--tasks", default=",".join(DEFAULT_TASKS), help=f"comma-separated subset of {','.join(TASKS)}")
    parser.add_argument(
        "--pooling",
        default=None,
        choices=("mean", "cls", "cls_before_pooler"),
        help="override the model's evaluation pooling",
    )
    parser.add_argument("--out", type=Path, default=Path("outputs/evaluation"), help="folder for <model>.md/.json")
    parser.add_argument("--name", default=None, help="label and file stem (default: derived from --model)")
    parser.add_argument("--seeds", type=int, default=10, help="KMeans seeds 0..N-1 (PairSupCon: 10)")
    parser.add_argument(
        "--kmeans-backend", default=None, choices=KMEANS_BACKENDS,
        help=f"KMeans implementation (default {DEFAULT_KMEANS_BACKEND}; both float32, seeded)",
    )
    parser.add_argument("--kmeans-n-init", type=int, default=10, help="KMeans restarts per seed")
    parser.add_argument(
        "--clustering-protocol", default="pairsupcon", choices=tuple(CLUSTERING_PROTOCOLS),
        help="pairsupcon (default): evaluation pooling, 32 tokens, --seeds KMeans seeds; clusterns: ClusterNS "
        "Table 6, raw [CLS], 128 tokens, one scikit-learn KMeans (overrides --pooling, --seeds, --kmeans-backend)",
    )
    parser.add_argument(
        "--clustering-max-length", type=int, default=None,
        help="token limit of the clustering embeddings (default: the protocol's, 32 or 128; PairSupCon's own "
        "evaluation code embeds at 64, as experiment=pairsupcon_* evaluates)",
    )
    parser.add_argument(
        "--embedding-cache", type=Path, default=None,
        help="folder keeping the embeddings (keyed by a hash of the weights) for later runs of the same model",
    )
    parser.add_argument("--datasets", default=",".join(BENCHMARKS), help="clustering benchmarks (conf/dataset names)")
    parser.add_argument("--short-text-dir", type=Path, default=SHARED / "short_text")
    parser.add_argument("--encoding", default=None,
                        help="text encoding of the clustering CSVs (default: each dataset config's, utf-8)")
    parser.add_argument("--senteval-dir", type=Path, default=SHARED / "senteval" / "downstream")
    parser.add_argument("--batch-size", type=int, default=128)
    parser.add_argument(
        "--transfer-max-train", type=int, default=None, help="subsample transfer training sets (quick runs)"
    )
    parser.add_argument(
        "--transfer-kfold", type=int, default=None, help="default: the protocol's (senteval: its setting's, sklearn 10)"
    )
    parser.add_argument(
        "--transfer-protocol",
        default="senteval",
        choices=("senteval", "sklearn", "senteval-toolkit"),
        help="senteval: SentEval's PyTorch logistic regression (the papers'); sklearn: scikit-learn logistic "
        "regression; senteval-toolkit: the installed SentEval package",
    )
    parser.add_argument(
        "--transfer-setting", default="default", choices=("default", "prototyping"), help="SentEval classifier setting"
    )
    parser.add_argument("--transfer-jobs", type=int, default=1, help="processes for the senteval protocol's folds")
    parser.add_argument(
        "--mteb-tasks", default="",
        help="with --tasks mteb: comma-separated MTEB task names (e.g. STS12,SciDocsRR) or local tables "
        "(text,label: clustering; sentence1,sentence2,score: STS)",
    )
    parser.add_argument(
        "--mteb-max-length", type=int, default=None,
        help="token limit for MTEB (default: a run's or checkpoint's max_length; other models: their position limit)"
    )
    parser.add_argument("--mteb-sts-range", default="0:5", help="lo:hi of the scores of local STS tables")
    parser.add_argument("--few-shot-k", type=int, default=16, help="--tasks few_shot: examples per class (16)")
    parser.add_argument("--few-shot-sets", type=int, default=5, help="--tasks few_shot: sampled training sets (5)")
    args = parser.parse_args(argv)

    if args.compare:
        table = compare_files(args.compare)
        print(table)
        return table
    if not args.model:
        parser.error("--model is required (or use --compare)")
    tasks = [t.strip() for t in args.tasks.split(",") if t.strip()]
    transfer_options = {
        "max_train": args.transfer_max_train,
        "kfold": args.transfer_kfold,
        "protocol": args.transfer_protocol,
        "setting": args.transfer_setting,
        "jobs": args.transfer_jobs,
    }
    if "transfer" in tasks:
        from evaluation.transfer import check_transfer_options

        check_transfer_options(transfer_options)  # before the model is loaded
    label = args.name or model_slug(args.model)
    mteb_options = None
    if "mteb" in tasks:
        from evaluation.mteb_eval import check_data_available, parse_range, resolve_tasks

        names = [t.strip() for t in args.mteb_tasks.split(",") if t.strip()]
        sts_range = parse_range(args.mteb_sts_range)
        check_data_available(resolve_tasks(names, sts_range))  # before the model is loaded
        mteb_options = {"tasks": names, "out_dir": args.out / "mteb", "label": label,
                        "max_length": args.mteb_max_length, "sts_range": sts_range}

    from evaluation.bow_baseline import BASELINES

    def log(message: str) -> None:
        print(message, file=sys.stderr, flush=True)

    start = time.perf_counter()
    if args.model in BASELINES:
        return evaluate_baseline(args, tasks, label, log, start)
    from evaluation.load import load_encoder

    clustering_max_length = 32
    if args.clustering_protocol == "clusterns":
        args.pooling, args.seeds, args.kmeans_backend, clustering_max_length = "cls_before_pooler", 1, "sklearn", 128
    if args.clustering_max_length is not None:
        if args.clustering_max_length < 1:
            raise ConfigError(f"--clustering-max-length must be >= 1, got {args.clustering_max_length}")
        clustering_max_length = args.clustering_max_length
    encoder, pooling = load_encoder(args.model, args.pooling)
    if mteb_options is not None and mteb_options["max_length"] is None and not is_run_reference(args.model):
        mteb_options["max_length"] = min(int(encoder.tokenizer.model_max_length),
                                         int(encoder.backbone.config.max_position_embeddings))
    result = evaluate_encoder(
        encoder,
        pooling,
        tasks,
        short_text_dir=args.short_text_dir,
        encoding=args.encoding,
        senteval_dir=args.senteval_dir,
        seeds=args.seeds,
        clustering_names=[d.strip() for d in args.datasets.split(",") if d.strip()],
        transfer_options=transfer_options,
        batch_size=args.batch_size,
        log=log,
        kmeans_backend=args.kmeans_backend,
        kmeans_n_init=args.kmeans_n_init,
        embedding_cache=args.embedding_cache,
        mteb_options=mteb_options,
        clustering_max_length=clustering_max_length,
        few_shot_options={"k": args.few_shot_k, "sets": args.few_shot_sets},
    )
    if "clustering" in result:
        result["clustering"]["protocol"] = args.clustering_protocol
    import torch

    result.update(
        model=args.model,
        label=label,
        date=dt.date.today().isoformat(),
        torch_threads=torch.get_num_threads(),
        wall_seconds=round(time.perf_counter() - start, 1),
        short_text_dir=str(args.short_text_dir),
        senteval_dir=str(args.senteval_dir),
    )
    md_path, json_path = write_outputs(result, args.out, label, label)
    print(md_path.read_text())
    print(f"wrote {md_path} and {json_path} ({result['wall_seconds']} s)", file=sys.stderr)
    return result


if __name__ == "__main__":
    import console

    console.run_cli(main)
