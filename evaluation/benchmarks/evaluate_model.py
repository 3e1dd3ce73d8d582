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
    clustering_sets,
    evaluate_clustering,
)
from evaluation.benchmarks.encoder_evaluation import (
    evaluate_encoder,
    model_slug,
    write_outputs,
)
from textcore import run_folder
from textcore.errors import ConfigError


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


def evaluate_model(args) -> dict:
    """``python tools.py evaluate`` (ctclust.commands.evaluate): ``args``, its parsed options (any object with their
    attributes), say the model, the tasks and how; the result is printed and written to ``args.output``."""
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

