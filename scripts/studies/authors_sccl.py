"""The SCCL authors' own training (amazon-science/sccl) with any local backbone, beside `run.py experiment=sccl_<set>`
(scripts/studies/sccl_side_by_side.py runs both and writes the table).

Nothing of theirs is part of this project: the script reads their files from a snapshot of their repository (a
`git clone --bare`, or a checkout, or the folder `scripts/bench/gpu_bundle.py --sccl-snapshot` exports into the
bundle) into a temporary folder and drives them as their `main.run` does (seed, explicit-augmentation DataLoader,
the first KMeans, `SCCLBert`, `get_optimizer`'s Adam groups, `SCCLvTrainer.train()`: their loss, their loop of
`max_iter + 1` steps, their evaluation every `print_freq` steps). What is changed, and why:

- the backbone: their `get_bert` loads `SentenceTransformer('distilbert-base-nli-stsb-mean-tokens')` from the
  Hub; here `--backbone` (the offline MiniLM, `minilm`, or a model folder) with `AutoModel` / `AutoTokenizer`,
  the same weights and tokenizer our run loads (sentence-transformers, imported by their utils/optimizer.py, is
  stubbed where it is missing);
- the device: their `.cuda()` calls become `.to(<--device>)` in the exported text (the same on a GPU); the first
  KMeans's embeddings, which their code computes with the backbone still on the CPU (it moves the model to the GPU
  afterwards), are computed on `--device` without a graph (the same numbers up to float rounding, minutes less on
  a node whose CPUs are shared by several runs), and without the `token_type_ids` a BERT tokenizer such as
  MiniLM's adds (their function takes none: DistilBERT's tokenizer makes none; zeros are the default);
- the libraries of today: scikit-learn's KMeans restarts 10 times as it did in their day (`n_init=10`; `auto`
  restarts once since 1.4), `np.int` (gone from NumPy) is `int`, tensorboardX's writer records the scalars
  instead of writing event files, and transformers 5's tokenizer gets `batch_encode_plus` back (the same call);
- the data: their DataLoader reads `<datapath>/<dataname>.csv`; the given file is copied with its labels numbered
  0..K-1 in sorted order (their `Confusion` indexes a K x K matrix by label).

At each of their evaluations (steps 0, print_freq, ..., max_iter, after that many steps + 1) it records their own
numbers (KMeans ACC/NMI with `random_state=seed`, the head's ACC) and the project's KMeans protocol on the same
embeddings (evaluation.clustering.metrics.kmeans_scores: seed = the run's seed, 10 restarts, the backend of the
device), with the wall time, and writes them to `--out` (JSON) after every evaluation.

    python scripts/studies/authors_sccl.py --snapshot <sccl git dir or folder> --data <folder> \
        --file searchsnippets.csv --text text0 --aug1 text0 --aug2 text1 --classes 8 --backbone minilm \
        --batch-size 400 --max-iter 1000 --print-freq 100 --seed 0 --device cuda --out authors_s0.json
"""
from __future__ import annotations

import argparse
import functools
import json
import sys
import tempfile
import time
import types
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from scripts.bench.gpu_bundle import copy_snapshot  # noqa: E402

# the files their training imports (main.py's run(), without main.py itself)
THEIR_FILES = ("training.py", "models/Transformers.py", "learner/cluster_utils.py", "learner/contrastive_utils.py",
               "utils/__init__.py", "utils/kmeans.py", "utils/logger.py", "utils/metric.py", "utils/optimizer.py",
               "dataloader/dataloader.py")


def export_snapshot(snapshot: Path, dest: Path, device: str) -> None:
    """Their files from a git dir (``git show HEAD:<file>``) or a folder, with ``.cuda()`` as ``.to(device)``."""
    copy_snapshot(snapshot, THEIR_FILES, dest, "give --snapshot a snapshot of amazon-science/sccl (a `git clone "
                  "--bare` of it, a checkout, or the bundle's .gpu/official/sccl)",
                  edit=lambda text: text.replace(".cuda()", f".to({device!r})"))


class Scalars:
    """tensorboardX's ``SummaryWriter`` as their logger uses it: the scalars kept, no event files."""

    written: dict[int, dict[str, float]] = {}

    def __init__(self, path: str = "", *args, **kwargs):
        Path(path).mkdir(parents=True, exist_ok=True)  # their evaluation saves .npy files there

    def add_scalar(self, tag: str, value, step: int) -> None:
        Scalars.written.setdefault(int(step), {})[tag] = float(value)

    def add_histogram(self, *args, **kwargs) -> None:
        pass


def numbered_labels(source: Path, dest: Path, label: str) -> list[int]:
    """``source`` copied to ``dest`` with column ``label`` renumbered 0..K-1 in sorted order; returns the labels."""
    import pandas as pd

    frame = pd.read_csv(source)
    order = {value: i for i, value in enumerate(sorted(frame[label].unique()))}
    frame[label] = frame[label].map(order)
    frame.to_csv(dest, index=False)
    return frame[label].astype(int).tolist()


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--snapshot", type=Path, required=True, help="amazon-science/sccl: git dir or folder")
    parser.add_argument("--data", type=Path, required=True, help="folder of the CSV")
    parser.add_argument("--file", default="searchsnippets.csv")
    parser.add_argument("--text", default="text0", help="their --text: the original (clustering, evaluation)")
    parser.add_argument("--aug1", default="text0", help="their --augmentation_1")
    parser.add_argument("--aug2", default="text1", help="their --augmentation_2")
    parser.add_argument("--label", default="label")
    parser.add_argument("--classes", type=int, required=True, help="their --num_classes")
    parser.add_argument("--backbone", default="minilm", help="minilm or a local model folder")
    parser.add_argument("--batch-size", type=int, default=400)
    parser.add_argument("--max-iter", type=int, default=1000, help="their --max_iter (they train max_iter + 1 steps)")
    parser.add_argument("--print-freq", type=int, default=100, help="their --print_freq: evaluation every N steps")
    parser.add_argument("--max-length", type=int, default=32)
    parser.add_argument("--lr", type=float, default=1e-5)
    parser.add_argument("--lr-scale", type=int, default=100)
    parser.add_argument("--eta", type=float, default=10.0)
    parser.add_argument("--temperature", type=float, default=0.5)
    parser.add_argument("--alpha", type=float, default=1.0)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--kmeans-n-init", type=int, default=10, help="their scikit-learn's KMeans restarts")
    parser.add_argument("--kmeans-backend", default=None, help="the project's KMeans on their embeddings "
                        "(default: the device's, as our run's evaluation: torch on a GPU, fast on the CPU)")
    parser.add_argument("--out", type=Path, required=True)
    args_in = parser.parse_args(argv)

    work = Path(tempfile.mkdtemp(prefix="authors_sccl_"))
    export_snapshot(args_in.snapshot, work, args_in.device)
    dataname = Path(args_in.file).stem + "_numbered"
    truth = np.asarray(numbered_labels(args_in.data / args_in.file, work / f"{dataname}.csv", args_in.label))
    sys.path.insert(0, str(work))
    np.int = int  # noqa: NPY001  (their evaluation: kmeans.labels_.astype(np.int); gone from NumPy 1.24)
    sys.modules["tensorboardX"] = types.SimpleNamespace(SummaryWriter=Scalars)
    try:
        import sentence_transformers  # noqa: F401  (their utils/optimizer.py imports it; get_bert is not called)
    except ImportError:
        sys.modules["sentence_transformers"] = types.SimpleNamespace(SentenceTransformer=None)
    import dataloader.dataloader as their_data  # noqa: E402  (their files, exported above)
    import training as their_training  # noqa: E402
    import utils.kmeans as their_kmeans  # noqa: E402
    from models.Transformers import SCCLBert  # noqa: E402
    from sklearn import cluster as sklearn_cluster
    from transformers import AutoModel, AutoTokenizer
    from utils.logger import set_global_random_seed  # noqa: E402
    from utils.optimizer import get_optimizer  # noqa: E402

    from evaluation.clustering.metrics import kmeans_scores

    their_kmeans.KMeans = functools.partial(sklearn_cluster.KMeans, n_init=args_in.kmeans_n_init)
    their_training.cluster = types.SimpleNamespace(
        KMeans=functools.partial(sklearn_cluster.KMeans, n_init=args_in.kmeans_n_init))
    device = torch.device(args_in.device)
    mean_embeddings = their_kmeans.get_mean_embeddings

    def first_kmeans_embeddings(bert, input_ids, attention_mask, token_type_ids=None):
        # a BERT tokenizer (MiniLM's) also returns token_type_ids, which their call passes on and their function
        # does not take (DistilBERT's has none); all zeros, the backbone's default for one segment
        with torch.no_grad():
            return mean_embeddings(bert, input_ids.to(device), attention_mask.to(device)).cpu()

    their_kmeans.get_mean_embeddings = first_kmeans_embeddings

    args = types.SimpleNamespace(
        datapath=str(work), dataname=dataname, text=args_in.text, augmentation_1=args_in.aug1,
        augmentation_2=args_in.aug2, label=args_in.label, num_classes=args_in.classes, max_length=args_in.max_length,
        lr=args_in.lr, lr_scale=args_in.lr_scale, max_iter=args_in.max_iter, objective="SCCL", augtype="explicit",
        batch_size=args_in.batch_size, temperature=args_in.temperature, eta=args_in.eta, alpha=args_in.alpha,
        seed=args_in.seed, print_freq=args_in.print_freq, resPath=str(work / "results") + "/", tensorboard=None,
        gpuid=[0], use_gpu=device.type == "cuda")
    args.tensorboard = Scalars(args.resPath)
    backbone = args_in.backbone
    if backbone == "minilm":
        from textcore.encoding.backbone import minilm_folder

        backbone = str(minilm_folder())

    # their main.run, in order
    began = time.time()
    set_global_random_seed(args.seed)
    train_loader = their_data.explict_augmentation_loader(args)
    bert, tokenizer = AutoModel.from_pretrained(backbone), AutoTokenizer.from_pretrained(backbone)
    if not hasattr(tokenizer, "batch_encode_plus"):  # removed in transformers 5: the same call
        type(tokenizer).batch_encode_plus = lambda self, text, **kw: self(list(text), **kw)
    bert.to(device)
    cluster_centers = their_kmeans.get_kmeans_centers(bert, tokenizer, train_loader, args.num_classes, args.max_length)
    model = SCCLBert(bert, tokenizer, cluster_centers=cluster_centers, alpha=args.alpha).to(device)
    optimizer = get_optimizer(model, args)
    trainer = their_training.SCCLvTrainer(model, tokenizer, optimizer, train_loader, args)
    start_up = time.time() - began

    # record, without changing anything: the evaluation's embeddings (their model in task_type="evaluate")
    recorded: list[torch.Tensor] = []
    forward = model.forward

    def recording_forward(input_ids, attention_mask, task_type="virtual"):
        out = forward(input_ids, attention_mask, task_type=task_type)
        if task_type == "evaluate":
            recorded.append(out.detach().float().cpu())
        return out

    model.forward = recording_forward
    evaluate = trainer.evaluate_embedding
    rows, timing = [], {"evaluation": 0.0}
    backend = args_in.kmeans_backend or ("torch" if device.type == "cuda" else "fast")

    def recording_evaluation(step):
        began_eval = time.time()
        recorded.clear()
        evaluate(step)
        theirs = Scalars.written.get(int(step), {})
        embeddings = torch.cat(recorded).numpy()
        ours = kmeans_scores(embeddings, truth, args.num_classes, seeds=(args.seed,), backend=backend)
        timing["evaluation"] += time.time() - began_eval
        row = {"step": int(step), "steps_trained": int(step) + 1,
               "their_kmeans_acc": 100 * theirs.get("Test/acc", float("nan")),
               "their_kmeans_nmi": 100 * theirs.get("Test/NMI", float("nan")),
               "their_head_acc": 100 * theirs.get("Test/acc_model", float("nan")),
               "kmeans_acc": 100 * ours["acc"], "kmeans_nmi": 100 * ours["nmi"],
               "seconds": round(time.time() - began, 1)}
        rows.append(row)
        print("authors_sccl:", json.dumps(row), flush=True)
        write()

    def write():
        args_in.out.write_text(json.dumps({
            "seed": args.seed, "device": str(device), "backbone": args_in.backbone, "batch_size": args.batch_size,
            "max_iter": args.max_iter, "file": args_in.file, "columns": [args.text, args.augmentation_1,
                                                                         args.augmentation_2],
            "kmeans_backend": backend, "start_up_seconds": round(start_up, 1),
            "evaluation_seconds": round(timing["evaluation"], 1), "evaluations": rows,
            "finished": len(rows) > 0 and rows[-1]["step"] == args.max_iter}, indent=1))

    trainer.evaluate_embedding = recording_evaluation
    trainer.train()
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    timing["total"] = time.time() - began
    record = json.loads(args_in.out.read_text())
    record.update(total_seconds=round(timing["total"], 1),
                  peak_gib=round(torch.cuda.max_memory_allocated(device) / 2**30, 2) if device.type == "cuda"
                  else None)
    args_in.out.write_text(json.dumps(record, indent=1))
    return record


if __name__ == "__main__":
    main()
