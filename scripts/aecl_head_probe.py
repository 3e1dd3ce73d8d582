"""AECL's clustering head beside the authors' own head code, on a frozen encoder (issue 32): a cheap probe.

The full comparison (scripts/aecl_side_by_side.py) trains the encoder too and costs about half an hour a run on two
cores. The collapse it showed is in the networks after the encoder (attention, clustering network) and in how
the stages train them, so this probe freezes the encoder: the MiniLM embeddings V of every text and of its EDA
augmentation are computed once (eval mode, mean pooling, 32 tokens), and three heads train on them at the
issue's budget (7 epochs of 100 batches of 64; stage 1 for 2 epochs, stage 2 for 3, stage 3 for 2; SearchSnippets;
the authors' default settings), from the same KMeans pseudo-labels:

- ``authors``: their Network's projector, attention layer (their utils/transformer.py) and clustering network,
  their ContrastiveLoss.forward and the stage weights and Adam optimiser of their train.py, read from a snapshot
  of YZH0905/AECL-STC (nothing of theirs is copied into the project; the device is patched as in
  scripts/authors_aecl.py);
- ``ours``: `lightning_modules.aecl.AECL` with `reference=true` (today: the authors' transformer layer), its
  own training_step and optimiser;
- ``ours_paper_attention``: the same with `method.attention=paper` (H = S·T; what reference=true trained before).

Each epoch ends with the head evaluated as the authors do (eval mode, one fixed random permutation of the set in
batches of 64). Printed: per epoch, head ACC (mean ± std over seeds) and the share of training rows with
max p⁰ >= 0.95; final head cluster sizes; at initialisation, distinct head predictions per batch and the mean
pairwise cosine of H.

    .venv/bin/python scripts/aecl_head_probe.py --snapshot <AECL-STC git dir> --data <short_text folder> --seeds 0,1,2
"""
from __future__ import annotations

import argparse
import itertools
import json
import statistics
import sys
import tempfile
import types
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

EPOCHS, BATCHES, BATCH, E1, E2, M = 7, 100, 64, 1, 3, 8
SETTINGS = dict(tau_instance=0.5, tau_cluster=1.0, lambda1=10.0, lambda2=5.0, lambda3=0.01, lambda4=0.18,
                confidence_threshold=0.95, lr=5e-6, head_lr_multiplier=100.0)  # train.py's defaults, ours named


def stage_of(epoch: int) -> int:
    return 1 if epoch <= E1 else 2 if epoch <= E1 + E2 else 3


def embed_corpus(data: Path, cache: Path) -> dict:
    if cache.exists():
        return torch.load(cache)
    import pandas as pd

    from lightning_modules.aecl import AECL

    frame = pd.read_csv(data / "searchsnippets.csv")
    module = AECL(num_clusters=M, backbone="minilm", max_length=32, chunk_tokens=0).eval()
    out = {"label": torch.as_tensor(frame["label"].astype(int).to_numpy())}
    for column in ("text0", "text1"):
        texts = frame[column].fillna(".").astype(str).tolist()
        with torch.no_grad():
            out[column] = torch.cat([module.embed(module.encoder.tokenize(texts[i:i + 256]))
                                     for i in range(0, len(texts), 256)])
        print(f"embedded {column}: {tuple(out[column].shape)}", flush=True)
    cache.parent.mkdir(parents=True, exist_ok=True)
    torch.save(out, cache)
    return out


def kmeans_labels(v0: torch.Tensor, order: torch.Tensor, seed: int) -> torch.Tensor:
    """Their get_kmeans_centers: sklearn KMeans on the permuted set, labels put back in row order."""
    from sklearn.cluster import KMeans

    fitted = KMeans(n_clusters=M, random_state=seed, max_iter=3000, tol=0.01, n_init="auto").fit(v0[order].numpy())
    labels = torch.empty(len(order), dtype=torch.long)
    labels[order] = torch.as_tensor(fitted.labels_.astype(int))
    return labels


class Ours:
    def __init__(self, attention: str, dim: int):
        from lightning_modules.aecl import AECL

        self.module = AECL(num_clusters=M, backbone="tiny", reference=True, attention=attention, **SETTINGS)
        # the heads are built for the tiny backbone's width: rebuild them for the cached embeddings' width
        from lightning_modules.aecl.attention import build_attention
        from lightning_modules.aecl.module import ClusteringNetwork
        from lightning_modules.shared.heads import ContrastHead

        self.module.projector = ContrastHead(dim, 128, normalize=False)
        self.module.attention = build_attention(self.module.attention_form, 128)
        self.module.cluster_head = ClusteringNetwork(128, dim, M, 0.5)
        self.logged: dict = {}
        self.module.log = lambda name, value, **kwargs: self.logged.__setitem__(
            name, float(torch.as_tensor(value).detach()))
        self.optimizer = self.module.configure_optimizers()
        self.cached = None
        self.module.embed_views = lambda views, pooling=None: self.cached

    def set_labels(self, labels):
        self.module.set_pseudo_labels(labels, epoch=E1 + 1)

    def step(self, epoch, index, v0, v1) -> float:
        self.module.train()
        self.module.set_stage(stage_of(epoch))
        self.cached = [v0, v1]
        loss = self.module.training_step({"index": index, "view1": None, "view2": None}, 0)
        loss.backward()
        self.optimizer.step()
        self.optimizer.zero_grad()
        return self.logged["train/confident_share"]  # max p⁰ >= 0.95 in this batch, before the step

    def head(self, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        self.module.eval()
        with torch.no_grad():
            out = self.module.view_heads(v)
        return out["logits"], out["h"]


class Authors:
    """Their Network (network.py) without its encoder, their ContrastiveLoss and their head optimiser."""

    def __init__(self, work: Path, dim: int):
        sys.path.insert(0, str(work))
        import loss as their_loss  # noqa: E402  (exported from their snapshot)
        import network as their_network  # noqa: E402

        encoder_stand_in = types.SimpleNamespace(config=types.SimpleNamespace(hidden_size=dim))
        self.net = their_network.Network(encoder_stand_in, None, 128, M)
        self.criterion = their_loss.ContrastiveLoss(BATCH, BATCH, M, 0.5, 1.0, torch.device("cpu"))
        self.optimizer = torch.optim.Adam(itertools.chain(self.net.instance_projector.parameters(),
                                                          self.net.cluster_projector.parameters(),
                                                          self.net.TransformerEncoderLayer.parameters()), lr=5e-4)
        self.args = types.SimpleNamespace(stage1_epoch=E1, stage2_epoch=E2, threshold=0.95, diagonal=0)
        self.labels = None

    def set_labels(self, labels):
        self.labels = labels

    def _forward(self, v):
        z = self.net.instance_projector(v)
        h, s = self.net.TransformerEncoderLayer(z)
        return z, h, s, self.net.cluster_projector(h)

    def step(self, epoch, index, v0, v1) -> float:
        self.net.train()
        z_i, h1, s1, c_i = self._forward(v0)
        z_j, h2, s2, c_j = self._forward(v1)
        pseudo = self.labels[index] if epoch <= E1 + E2 else torch.argmax(c_i, dim=1)
        cross, instance, cluster, entropy, h_loss = self.criterion.forward(
            self.args, epoch, F.normalize(z_i, dim=1), F.normalize(z_j, dim=1), c_i, c_j, pseudo,
            F.normalize(h1, dim=1), s1, F.normalize(h2, dim=1), s2)
        if epoch <= E1:  # train.py's stage weights: lamda4 = 10, lamda3 = 5, lamda1 = 0.18, lamda2 = 0.01
            loss = 10 * instance
        elif epoch <= E1 + E2:
            loss = 10 * instance + 5 * cross
        else:
            loss = cluster + 0.18 * entropy - 0.01 * h_loss + 5 * cross + 10 * instance
        loss.backward()
        self.optimizer.step()
        self.optimizer.zero_grad()
        return float((torch.softmax(c_i.detach(), 1).max(1).values >= 0.95).float().mean())

    def head(self, v):
        self.net.eval()
        with torch.no_grad():
            _, h, _, c = self._forward(v)
        return c, h


def run(side: str, seed: int, corpus: dict, work: Path) -> dict:
    from evaluation.clustering.metrics import cluster_accuracy, clustering_scores

    v0_all, v1_all, truth = corpus["text0"], corpus["text1"], corpus["label"].numpy()
    n, dim = v0_all.shape
    torch.manual_seed(seed)
    np.random.seed(seed)
    model = Authors(work, dim) if side == "authors" else Ours(
        "paper" if side == "ours_paper_attention" else "transformer", dim)
    order = torch.randperm(n)  # their evaluation order (a fixed permutation, batches in turn)
    model.set_labels(kmeans_labels(v0_all, order, seed))

    def evaluate():
        logits, hs = zip(*(model.head(v0_all[order[i:i + BATCH]]) for i in range(0, n, BATCH)))
        pred = torch.cat(logits).argmax(dim=1).numpy()
        return pred, hs, logits

    pred, hs, logits = evaluate()
    h = F.normalize(hs[0], dim=1)
    start = {"distinct_per_batch": float(np.mean([len(torch.unique(c.argmax(1))) for c in logits])),
             "h_cosine": float((h @ h.T)[~torch.eye(len(h), dtype=torch.bool)].mean())}
    epochs = []
    for epoch in range(EPOCHS):
        loader = torch.utils.data.DataLoader(torch.arange(n), batch_size=BATCH, shuffle=True)
        confident = [model.step(epoch, index, v0_all[index], v1_all[index])
                     for index in itertools.islice(iter(loader), BATCHES)]
        pred, _, _ = evaluate()
        labels_in_order = truth[order.numpy()]
        epochs.append({"epoch": epoch + 1, "stage": stage_of(epoch),
                       "head_acc": 100 * cluster_accuracy(labels_in_order, pred),
                       "head_nmi": 100 * clustering_scores(labels_in_order, pred)["nmi"],
                       "confident_share": 100 * statistics.mean(confident)})
        print(f"{side} seed {seed}: {json.dumps(epochs[-1])}", flush=True)
    sizes = sorted(np.bincount(pred, minlength=M).tolist(), reverse=True)
    return {"side": side, "seed": seed, "start": start, "epochs": epochs, "head_sizes": sizes}


def _ms(values):
    return f"{statistics.mean(values):.2f} ± {statistics.stdev(values):.2f}" if len(values) > 1 else f"{values[0]:.2f}"


def report(results: list[dict]) -> str:
    sides = ["authors", "ours", "ours_paper_attention"]
    by = {s: [r for r in results if r["side"] == s] for s in sides}
    lines = ["| end of epoch | stage | " + " | ".join(f"{s} head ACC" for s in sides) + " | "
             + " | ".join(f"{s} max p⁰ >= 0.95 (%)" for s in sides) + " |",
             "|---" * (2 + 2 * len(sides)) + "|"]
    for e in range(EPOCHS):
        acc = [_ms([r["epochs"][e]["head_acc"] for r in by[s]]) for s in sides]
        conf = [_ms([r["epochs"][e]["confident_share"] for r in by[s]]) for s in sides]
        lines.append(f"| {e + 1} ({(e + 1) * BATCHES}) | {stage_of(e)} | " + " | ".join(acc) + " | "
                     + " | ".join(conf) + " |")
    lines.append("")
    for s in sides:
        starts = by[s]
        lines.append(f"{s}: at initialisation {_ms([r['start']['distinct_per_batch'] for r in starts])} distinct "
                     f"head predictions per batch of {BATCH}, mean pairwise cosine of H "
                     f"{_ms([r['start']['h_cosine'] for r in starts])}")
        for r in starts:
            lines.append(f"  seed {r['seed']}: final head cluster sizes {' / '.join(map(str, r['head_sizes']))}")
    return "\n".join(lines)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--snapshot", type=Path, required=True, help="YZH0905/AECL-STC git directory or checkout")
    parser.add_argument("--data", type=Path, required=True, help="folder with searchsnippets.csv")
    parser.add_argument("--seeds", default="0,1,2")
    parser.add_argument("--out", type=Path, default=ROOT / "logs" / "aecl_head_probe")
    args = parser.parse_args(argv)
    from authors_aecl import export_snapshot

    torch.set_num_threads(1)  # the heads are small: one thread is faster than two fighting over tiny kernels

    work = Path(tempfile.mkdtemp(prefix="authors_aecl_"))
    export_snapshot(args.snapshot, work, "cpu")
    corpus = embed_corpus(args.data, args.out / "minilm_searchsnippets.pt")
    results = []
    for seed in (int(s) for s in args.seeds.split(",")):
        for side in ("authors", "ours", "ours_paper_attention"):
            result = run(side, seed, corpus, work)
            print(json.dumps({k: result[k] for k in ("side", "seed", "head_sizes")}),
                  f"final head ACC {result['epochs'][-1]['head_acc']:.2f}", flush=True)
            results.append(result)
    (args.out / "results.json").write_text(json.dumps(results, indent=1))
    print(report(results))


if __name__ == "__main__":
    main()
