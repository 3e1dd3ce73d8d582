"""Evaluate any model on clustering, STS and transfer from one command (docs/evaluation.md).

    python tools.py evaluate --model <run dir | .ckpt | folder | Hub name | minilm>
        [--tasks clustering,sts,transfer,mteb] [--mteb-tasks STS12,my.csv] [--output DIR] [--kmeans-runs 10]
        [--short-text-dir data/short_text] [--senteval-dir data/senteval/downstream]
    python tools.py evaluate --compare a.json b.json ...

- clustering: the PairSupCon protocol (Table 1): embeddings from the model's evaluation pooling,
  KMeans with seeds 0..S-1 (``evaluation.clustering.metrics.kmeans_scores``), ACC and NMI mean (std) per
  dataset and their average. Each benchmark's file, text/label columns and number of clusters
  come from its Hydra config ``conf/dataset/<name>.yaml``; a dataset whose file is absent is
  skipped with a note.
- sts: ``evaluation.benchmarks.sts`` (Spearman of cosine similarity, no training: SimCSE's protocol; STS12-16
  'all' aggregation, STS-B and SICK-R test splits scored by cosine, not SentEval's supervised
  regressor).
- transfer: ``evaluation.benchmarks.transfer`` under ``--transfer-protocol`` (default ``senteval``: SentEval's
  PyTorch logistic regression, the papers' protocol; ``sklearn``: scikit-learn logistic
  regression; ``senteval-toolkit``: the installed SentEval package); slow on CPU, so not in the
  default task list. Tables and headline rows name the protocol.
- mteb: ``evaluation.benchmarks.mteb_eval`` runs the MTEB tasks named by ``--mteb-tasks`` (MTEB names or local
  tables) through the ``mteb`` package with this encoder; MTEB's result files go to ``<out>/mteb/``
  and the table is named after MTEB's protocol and version.

Writes ``<out>/<model slug>.md`` and ``.json``; ``--compare`` prints the headline numbers of
several such JSON files side by side.
"""

from __future__ import annotations

import datetime as dt
import sys
import time
from pathlib import Path
from typing import Sequence

from evaluation.benchmarks.clustering_tasks import (
    BENCHMARKS,
    CLUSTERING_PROTOCOLS,
    DATA,
    clustering_sets,
    evaluate_clustering,
)
from evaluation.benchmarks.encoder_evaluation import (
    DEFAULT_TASKS,
    TASKS,
    compare_files,
    evaluate_encoder,
    model_slug,
    write_outputs,
)
from textcore import console, run_folder
from textcore.device_settings import OUTSIDE_TRAINING
from textcore.errors import ConfigError, exit_on_user_error
from textcore.kmeans import KMEANS_BACKENDS


def is_run_reference(model_ref: str) -> bool:
    """A checkpoint or a run folder of this project (its encoder carries the run's max_length)."""
    path = Path(model_ref)
    return path.suffix == ".ckpt" or (path.is_dir() and run_folder.RunFolder(path).config_file.is_file())


def backend_cache(model_ref: str) -> Path | None:
    """Where ``--backend onnx*`` keeps its export: the run folder of a run, a model folder itself, else the user's
    cache (``textcore.encoding.onnx_runtime.embedder``'s default)."""
    path = Path(model_ref)
    if path.suffix == ".ckpt":
        from evaluation.model_io.load import checkpoint_run_dir

        return checkpoint_run_dir(path) or path.parent
    return path if path.is_dir() else None


def evaluate_baseline(args, tasks: Sequence[str], label: str, log, start: float) -> dict:
    """``--model tfidf`` / ``--model bow``: the bag-of-words clustering rows
    (``evaluation.clustering.bow_baseline``)."""
    from evaluation.clustering.bow_baseline import DESCRIPTIONS, features

    if list(tasks) != ["clustering"]:
        raise ConfigError(f"--model {args.model} is a clustering baseline: use --tasks clustering "
                          f"(got {','.join(tasks)})")
    sets = clustering_sets(args.short_text_dir, [d.strip() for d in args.datasets.split(",") if d.strip()],
                           encoding=args.encoding)
    result: dict = {"pooling": args.model, "notes": [DESCRIPTIONS[args.model]], "seconds": {}}
    result["clustering"] = evaluate_clustering(features(args.model), sets, tuple(range(args.kmeans_runs)), log,
                                               kmeans_backend=args.kmeans_backend, kmeans_n_init=args.kmeans_n_init)
    result["clustering"]["max_length"] = None
    result["notes"] += [f"clustering: {n} skipped ({w})" for n, w in result["clustering"]["skipped"].items()]
    result["seconds"]["clustering"] = round(time.perf_counter() - start, 1)
    result.update(model=args.model, label=label, date=dt.date.today().isoformat(),
                  wall_seconds=round(time.perf_counter() - start, 1), short_text_dir=str(args.short_text_dir))
    md_path, json_path = write_outputs(result, args.output, label, label)
    print(md_path.read_text())
    print(f"wrote {md_path} and {json_path} ({result['wall_seconds']} s)", file=sys.stderr)
    return result


def build_parser():
    """The options of ``python tools.py evaluate``."""
    parser = console.tool_parser("evaluate", __doc__)
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
    parser.add_argument("--output", type=Path, default=Path("outputs/evaluation"), help="folder for <model>.md/.json")
    parser.add_argument("--name", default=None, help="label and file stem (default: derived from --model)")
    parser.add_argument("--kmeans-runs", type=int, default=10, help="KMeans runs, with seeds 0..N-1 (PairSupCon: 10)")
    parser.add_argument(
        "--kmeans-backend", default=OUTSIDE_TRAINING["kmeans_backend"], choices=KMEANS_BACKENDS,
        help="KMeans implementation (default %(default)s; all float32, seeded)",
    )
    parser.add_argument("--kmeans-n-init", type=int, default=10, help="KMeans restarts per seed")
    parser.add_argument(
        "--clustering-protocol", default="pairsupcon", choices=tuple(CLUSTERING_PROTOCOLS),
        help="pairsupcon (default): evaluation pooling, 32 tokens, --kmeans-runs KMeans runs; clusterns: ClusterNS "
        "Table 6, raw [CLS], 128 tokens, one scikit-learn KMeans (overrides --pooling, --kmeans-runs, "
        "--kmeans-backend)",
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
    parser.add_argument("--short-text-dir", type=Path, default=DATA / "short_text",
                        help="folder of the clustering benchmarks' CSVs")
    parser.add_argument("--encoding", default=None,
                        help="text encoding of the clustering CSVs (default: each dataset config's, utf-8)")
    parser.add_argument("--senteval-dir", type=Path, default=DATA / "senteval" / "downstream",
                        help="SentEval's downstream folder (STS and transfer tasks)")
    parser.add_argument("--batch-size", type=int, default=128, help="texts per encoder batch")
    from evaluation.model_io.predict import add_backend_argument

    add_backend_argument(parser)
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
    run_folder.add_trust_option(parser)
    return parser


def mteb_settings(args, tasks: list[str], label: str) -> dict | None:
    """The MTEB part's options, its tasks checked before the model is loaded (None without ``mteb``)."""
    if "mteb" not in tasks:
        return None
    from evaluation.benchmarks.mteb_eval import check_data_available, parse_range, resolve_tasks

    names = [t.strip() for t in args.mteb_tasks.split(",") if t.strip()]
    sts_range = parse_range(args.mteb_sts_range)
    check_data_available(resolve_tasks(names, sts_range))  # before the model is loaded
    return {"tasks": names, "out_dir": args.output / "mteb", "label": label, "max_length": args.mteb_max_length,
            "sts_range": sts_range}


def clustering_max_length(args) -> int:
    """The clustering embeddings' token limit: the protocol's (32; ClusterNS's 128, which also sets its pooling,
    one run and scikit-learn's KMeans on ``args``), or ``--clustering-max-length``."""
    length = 32
    if args.clustering_protocol == "clusterns":
        args.pooling, args.kmeans_runs, args.kmeans_backend = "cls_before_pooler", 1, "sklearn"
        length = 128
    if args.clustering_max_length is not None:
        if args.clustering_max_length < 1:
            raise ConfigError(f"--clustering-max-length must be >= 1, got {args.clustering_max_length}")
        length = args.clustering_max_length
    return length


@exit_on_user_error
def main(argv: Sequence[str] | None = None) -> dict | str:
    parser = build_parser()
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
        from evaluation.benchmarks.transfer import check_transfer_options

        check_transfer_options(transfer_options)  # before the model is loaded
    label = args.name or model_slug(args.model)
    mteb_options = mteb_settings(args, tasks, label)

    from evaluation.clustering.bow_baseline import BASELINES

    def log(message: str) -> None:
        print(message, file=sys.stderr, flush=True)

    start = time.perf_counter()
    if args.model in BASELINES:
        return evaluate_baseline(args, tasks, label, log, start)
    from evaluation.model_io.load import load_encoder

    max_length = clustering_max_length(args)
    encoder, pooling = load_encoder(args.model, args.pooling, args.trust_checkpoint)
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
        seeds=args.kmeans_runs,
        clustering_names=[d.strip() for d in args.datasets.split(",") if d.strip()],
        transfer_options=transfer_options,
        batch_size=args.batch_size,
        log=log,
        kmeans_backend=args.kmeans_backend,
        kmeans_n_init=args.kmeans_n_init,
        embedding_cache=args.embedding_cache,
        mteb_options=mteb_options,
        clustering_max_length=max_length,
        few_shot_options={"k": args.few_shot_k, "sets": args.few_shot_sets},
        backend=args.backend,
        backend_cache=backend_cache(args.model),
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
    md_path, json_path = write_outputs(result, args.output, label, label)
    print(md_path.read_text())
    print(f"wrote {md_path} and {json_path} ({result['wall_seconds']} s)", file=sys.stderr)
    return result


if __name__ == "__main__":
    console.run_cli(main)
