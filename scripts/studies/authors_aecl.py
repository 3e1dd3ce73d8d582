"""The AECL authors' own training (YZH0905/AECL-STC) at a small budget, beside `run.py experiment=aecl_<set>`.

Nothing of theirs is part of this project: the script reads their files from a snapshot of their repository
(`git clone --bare` of it, or a checkout) into a temporary folder, changes only what
cannot run here (the device: their code calls `.to('cuda')`; the backbone: their `SentenceTransformer
('pretrain-model')` becomes a local folder; the data file), and drives their `train(args, epoch, kmeans_labels)`
exactly as their `__main__` does (where sentence-transformers is not installed, the module their unused
`get_bert` imports is stubbed): their network, their loss, their two Adam optimisers, their KMeans
pseudo-labels, their evaluation in model.eval() on one fixed random permutation of the set. An epoch is the
first `--batches` batches of each freshly shuffled epoch of their DataLoader (shuffle=True).

It prints, at the end of each epoch, their head's ACC/NMI and a KMeans ACC/NMI of the same evaluation's
embeddings computed as this project's evaluation computes it (evaluation.clustering.metrics, the project's KMeans
backend), the stage, the share of training rows whose max p⁰ >= 0.95, and the head's cluster sizes; and writes
them as JSON (one object per epoch) to `--out`.

    python scripts/studies/authors_aecl.py --snapshot <AECL-STC git dir> --data <folder with searchsnippets.csv> \
        --backbone minilm --stage1 1 --stage2 3 --epochs 7 --batches 100 --batch-size 64 --seed 0 --out a.json

With `--init-from <our last.ckpt> --start-epoch E` their loop starts at epoch E from the state of one of this
project's AECL runs (weights and both Adam states, mapped by name: `ours_state_for_theirs`), evaluates that state
first (a row for epoch E), then trains epochs E..--epochs-1 as their `__main__` does. This is how
`scripts/studies/aecl_side_by_side.py --swap` runs their stage 3 from exactly the state ours starts it from.

scripts/studies/aecl_side_by_side.py runs this and the project for several seeds and writes the comparison table.
"""
from __future__ import annotations

import argparse
import itertools
import json
import subprocess
import sys
import tempfile
import time
import types
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

def export_snapshot(snapshot: Path, dest: Path, device: str) -> None:
    """Their Python files from the snapshot (a git dir: `git show HEAD:<file>`; a checkout: read), device patched."""
    if (snapshot / "train.py").is_file():
        names = [str(f.relative_to(snapshot)) for f in snapshot.rglob("*.py")]
    else:
        listing = subprocess.run(["git", "--git-dir", str(snapshot), "ls-tree", "-r", "--name-only", "HEAD"],
                                 check=True, capture_output=True, text=True).stdout.split()
        names = [name for name in listing if name.endswith(".py")]
    for name in names:
        if (snapshot / name).is_file():
            text = (snapshot / name).read_text()
        else:
            text = subprocess.run(["git", "--git-dir", str(snapshot), "show", f"HEAD:{name}"], check=True,
                                  capture_output=True, text=True).stdout
        text = text.replace("'cuda'", repr(device)).replace('"cuda"', repr(device))
        (dest / name).parent.mkdir(parents=True, exist_ok=True)
        (dest / name).write_text(text)


def backbone_folder(name: str) -> str:
    if name == "minilm":
        from textcore.encoding.backbone import minilm_folder

        return str(minilm_folder())
    return name


# our AECL module's names -> their network.py names (their Network: backbone, instance_projector,
# TransformerEncoderLayer, cluster_projector; the Sequential indices are the same on both sides)
OURS_TO_THEIRS = (("encoder.backbone.", "backbone."), ("projector.net.", "instance_projector."),
                  ("attention.", "TransformerEncoderLayer."), ("cluster_head.net.", "cluster_projector."))


def _their_name(ours: str) -> str | None:
    for prefix, theirs in OURS_TO_THEIRS:
        if ours.startswith(prefix):
            return theirs + ours[len(prefix):]
    return None


def ours_state_for_theirs(checkpoint: dict, model, optimizer, optimizer_head) -> None:
    """Loads one of our AECL Lightning checkpoints into their Network and their two Adam optimisers.

    Weights by name (OURS_TO_THEIRS); every trained parameter of theirs must be found (their unused Common_view
    keeps its initialisation). Our one Adam has two groups, the backbone's parameters (in
    ``backbone.parameters()`` order) and the rest (projector, attention, clustering network, in registration
    order); their ``optimizer`` holds the backbone and ``optimizer_head`` the rest, in their own order. Each of our
    Adam states goes to the parameter of the same name; shapes are checked.
    """
    state = checkpoint["state_dict"]
    theirs = {k: _their_name(k) for k in state if _their_name(k) is not None}  # ours -> theirs, in our order
    missing, unexpected = model.load_state_dict({t: state[k] for k, t in theirs.items()}, strict=False)
    missing = [k for k in missing if not k.startswith("Common_view.")]
    if missing or unexpected:
        raise SystemExit(f"checkpoint does not map onto their Network: missing {missing}, unexpected {unexpected}")
    # our parameter order: group 0 = backbone parameters, group 1 = the rest of the module in registration order
    backbone_names = [k for k, _ in model.backbone.named_parameters()]
    head_names = [k for k in theirs if not k.startswith("encoder.backbone.")]
    order = ["encoder.backbone." + k for k in backbone_names] + head_names
    adam = checkpoint["optimizer_states"][0]
    sizes = [len(g["params"]) for g in adam["param_groups"]]
    expected = [len(backbone_names), len(head_names)]
    if sizes != expected:
        raise SystemExit(f"our Adam has groups of {sizes} parameters, expected {expected}")
    params = dict(model.named_parameters())
    for index, name in enumerate(order):
        param = params[theirs[name]]
        if tuple(state[name].shape) != tuple(param.shape):
            raise SystemExit(f"{name}: shape {tuple(state[name].shape)} against theirs {tuple(param.shape)}")
        saved = adam["state"].get(index)
        if saved is None:  # a parameter that never had a gradient (the backbone's pooler)
            continue
        if tuple(saved["exp_avg"].shape) != tuple(param.shape):
            raise SystemExit(f"Adam state {index} ({name}) has shape {tuple(saved['exp_avg'].shape)}, "
                             f"the parameter {tuple(param.shape)}")
        target = optimizer if name.startswith("encoder.backbone.") else optimizer_head
        # their Adam is neither fused nor capturable: its step count lives on the CPU
        # copies: the checkpoint's tensors may be another optimiser's live state
        target.state[param] = {k: (v.detach().to("cpu", torch.float32, copy=True) if k == "step"
                                   else v.detach().to(param, copy=True)) for k, v in saved.items()}


class FirstBatches:
    """Their DataLoader cut to its first `n` batches per pass (each pass reshuffles, as theirs does)."""

    def __init__(self, loader, n: int):
        self.loader, self.n = loader, n

    def __iter__(self):
        return itertools.islice(iter(self.loader), self.n)

    def __len__(self):
        return min(self.n, len(self.loader))


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--snapshot", type=Path, required=True, help="AECL-STC git directory or checkout")
    parser.add_argument("--data", type=Path, required=True, help="folder with <set>.csv (label,text0,text1)")
    parser.add_argument("--set", default="searchsnippets")
    parser.add_argument("--class-num", type=int, default=8)
    parser.add_argument("--backbone", default="minilm", help="minilm or a local model folder")
    parser.add_argument("--stage1", type=int, default=1, help="their --stage1_epoch")
    parser.add_argument("--stage2", type=int, default=3, help="their --stage2_epoch")
    parser.add_argument("--epochs", type=int, default=7)
    parser.add_argument("--batches", type=int, default=100, help="training batches per epoch")
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--lamda1", type=float, default=0.18, help="their --lamda1 (marginal entropy)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--init-from", type=Path, help="start from one of our AECL checkpoints (last.ckpt)")
    parser.add_argument("--start-epoch", type=int, default=0, help="their --start_epoch (with --init-from)")
    parser.add_argument("--out", type=Path, required=True)
    args_in = parser.parse_args(argv)

    work = Path(tempfile.mkdtemp(prefix="authors_aecl_"))
    export_snapshot(args_in.snapshot, work, args_in.device)
    sys.path.insert(0, str(work))
    import loda_data as their_data  # noqa: E402  (their files, exported above)
    import loss as their_loss  # noqa: E402
    import network as their_network  # noqa: E402
    import pandas as pd
    from transformers import AutoModel, AutoTokenizer

    from evaluation.clustering.catalogue import cluster_accuracy
    from evaluation.clustering.metrics import clustering_scores, kmeans_scores
    from textcore.device_settings import OUTSIDE_TRAINING

    try:
        import sentence_transformers  # noqa: F401  (their utils/optimizer.py imports it; the loop does not use it)
    except ImportError:  # a GPU machine without it: their get_bert is not called here (the backbone is loaded below)
        sys.modules["sentence_transformers"] = types.SimpleNamespace(SentenceTransformer=None)
    train_source = (work / "train.py").read_text()
    their_train = types.ModuleType("their_train")
    exec(compile(train_source, str(work / "train.py"), "exec"), their_train.__dict__)  # __name__ != "__main__"

    args = their_train.get_args_parser().parse_args([
        "--batch_size", str(args_in.batch_size), "--seed", str(args_in.seed), "--epochs", str(args_in.epochs),
        "--stage1_epoch", str(args_in.stage1), "--stage2_epoch", str(args_in.stage2),
        "--lamda1", str(args_in.lamda1), "--data_name", args_in.set, "--class_num", str(args_in.class_num),
        "--max_length", "32", "--num_workers", "0", "--start_epoch", str(args_in.start_epoch),
    ])
    if args_in.start_epoch and args_in.init_from is None:
        raise SystemExit("--start-epoch needs --init-from (the state that epoch starts from)")
    # their __main__, in order (seeds, model, data, loss, optimisers, first KMeans)
    torch.manual_seed(args.seed)
    np.random.seed(args.seed)
    folder = backbone_folder(args_in.backbone)
    text_model, tokenizer = AutoModel.from_pretrained(folder), AutoTokenizer.from_pretrained(folder)
    if not hasattr(tokenizer, "encode_plus"):  # removed in transformers 5: the same call
        type(tokenizer).encode_plus = lambda self, text, **kw: self(text, **kw)
    model = their_network.Network(text_model, tokenizer, args.feature_dim, args.class_num).to(args_in.device)

    frame = pd.read_csv(args_in.data / f"{args_in.set}.csv")
    # numpy object arrays, as their pandas gave (pandas 3 returns Arrow-backed strings)
    text0 = np.asarray(frame["text0"].fillna(".").to_numpy(dtype=object))
    text1 = np.asarray(frame["text1"].fillna(".").to_numpy(dtype=object))
    label = frame["label"].astype(int).to_numpy()
    indices = torch.randperm(label.size)
    text0_shuffled, label_shuffled = text0[indices], label[indices]

    dataset_t = their_data.train_Dataset(text0, text1, tokenizer, args)
    train_loader = torch.utils.data.DataLoader(dataset_t, batch_size=args.batch_size, shuffle=True, num_workers=0)
    dataset_c = their_data.test_Dataset(text0_shuffled, label_shuffled, tokenizer, args)
    test_loader = torch.utils.data.DataLoader(dataset_c, batch_size=args.batch_size, shuffle=False, num_workers=0)
    criterion = their_loss.ContrastiveLoss(args.batch_size, args.batch_size, args.class_num,
                                           args.instance_temperature, args.cluster_temperature,
                                           torch.device(args_in.device)).to(args_in.device)
    optimizer = torch.optim.Adam(model.backbone.parameters(), lr=args.lr_backbone)
    optimizer_head = torch.optim.Adam(itertools.chain(model.instance_projector.parameters(),
                                                      model.cluster_projector.parameters(),
                                                      model.TransformerEncoderLayer.parameters()), lr=args.lr_head)

    # what their train() sees as globals
    g = their_train.__dict__
    g.update(model=model, train_Dataloader=FirstBatches(train_loader, args_in.batches), test_Dataloader=test_loader,
             criterion=criterion, optimizer=optimizer, optimizer_head=optimizer_head)

    # record, without changing anything: the evaluation's outputs (their forward_cluster in eval mode) and the
    # training rows' confidence (their criterion's c_i)
    recorded = {"eval": [], "confident": []}
    forward_cluster = model.forward_cluster

    def recording_forward_cluster(input_ids, attention_mask):
        out = forward_cluster(input_ids, attention_mask)
        recorded["eval"].append((out[0].detach().cpu(), out[2].detach().cpu()))
        return out

    criterion_forward = criterion.forward

    def recording_criterion(a, epoch, z_i, z_j, c_i, *rest):
        with torch.no_grad():
            recorded["confident"].append(torch.softmax(c_i, dim=1).max(dim=1).values.cpu())
        return criterion_forward(a, epoch, z_i, z_j, c_i, *rest)

    model.forward_cluster = recording_forward_cluster
    criterion.forward = recording_criterion


    kmeans_labels = their_train.get_kmeans_centers(args, model, test_loader, args.class_num)
    restored = torch.empty_like(kmeans_labels)
    restored[indices] = kmeans_labels
    kmeans_labels = restored
    truth = np.asarray(label_shuffled)

    rows = []
    start = time.time()
    if args_in.init_from is not None:
        checkpoint = torch.load(args_in.init_from, map_location=args_in.device, weights_only=False)
        ours_state_for_theirs(checkpoint, model, optimizer, optimizer_head)
        # the loaded state, evaluated as their train() evaluates at an epoch's end
        model.eval()
        with torch.no_grad():
            head = torch.cat([model.forward_cluster(ids, mask)[2].cpu() for ids, mask, _, _ in test_loader]).numpy()
        recorded["eval"].clear()
        row = {"epoch": args_in.start_epoch, "step": args_in.start_epoch * args_in.batches, "loaded": True,
               "from": str(args_in.init_from), "head_acc": 100 * cluster_accuracy(truth, head),
               "head_sizes": sorted(np.bincount(head, minlength=args.class_num).tolist(), reverse=True)}
        rows.append(row)
        print("authors_aecl:", json.dumps(row), flush=True)
    for epoch in range(args.start_epoch, args.epochs):
        recorded["eval"].clear()
        recorded["confident"].clear()
        _, _, _, _, _, _, pseudo_label = their_train.train(args, epoch, kmeans_labels)
        if epoch <= args.stage1_epoch:
            kmeans_labels[indices] = pseudo_label
        embeddings = torch.cat([e for e, _ in recorded["eval"]]).numpy()
        head = torch.cat([p for _, p in recorded["eval"]]).numpy()
        stage = 1 if epoch <= args.stage1_epoch else 2 if epoch <= args.stage1_epoch + args.stage2_epoch else 3
        km = kmeans_scores(embeddings, truth, args.class_num, seeds=(args.seed,),
                           backend=OUTSIDE_TRAINING["kmeans_backend"])
        confidence = torch.cat(recorded["confident"])
        row = {
            "epoch": epoch + 1, "stage": stage, "step": (epoch + 1) * args_in.batches,
            "head_acc": 100 * cluster_accuracy(truth, head),
            "head_nmi": 100 * clustering_scores(truth, head)["nmi"],
            "kmeans_acc": 100 * km["acc"], "kmeans_nmi": 100 * km["nmi"],
            "confident_share": 100 * float((confidence >= args.threshold).float().mean()),
            # the KMeans labels the next epoch trains on in stage 2 (their code refreshes them through stage 1)
            "pseudo_label_acc": 100 * cluster_accuracy(label, kmeans_labels.numpy()),
            "head_sizes": sorted(np.bincount(head, minlength=args.class_num).tolist(), reverse=True),
            "seconds": round(time.time() - start, 1),
        }
        rows.append(row)
        print("authors_aecl:", json.dumps(row), flush=True)
        args_in.out.write_text(json.dumps({"seed": args.seed, "epochs": rows}, indent=1))


if __name__ == "__main__":
    main()
