"""How much one KMeans run with one initialisation varies: AECL's stage-2 pseudo-labels.

The authors' AECL computes its pseudo-labels with ``KMeans(n_clusters, random_state=seed, max_iter=3000,
tol=0.01, n_init='auto')``; with k-means++ scikit-learn's ``'auto'`` is one initialisation, and so is this
project's recipe (``method.callbacks.stage_switch.kmeans_n_init=1``). In stage 2 the head is fitted to those
labels, so its accuracy follows theirs. This script embeds a corpus with a backbone (no training) and reports the
ACC of single-initialisation KMeans for several seeds, beside the best-inertia run of ``n_init`` restarts.

    .venv/bin/python scripts/studies/kmeans_single_init_spread.py --data data/short_text/searchsnippets.csv \
        --clusters 8 --seeds 20
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))


def single_init_accuracies(embeddings: np.ndarray, labels: np.ndarray, clusters: int, seeds: int,
                           n_init: int = 1) -> list[float]:
    """ACC x100 of ``KMeans(clusters, random_state=s, max_iter=3000, tol=0.01, n_init=n_init)`` for s < seeds."""
    from sklearn.cluster import KMeans

    from evaluation.clustering.catalogue import cluster_accuracy

    return [100 * cluster_accuracy(labels, KMeans(clusters, random_state=seed, max_iter=3000, tol=0.01,
                                                  n_init=n_init).fit(embeddings).labels_) for seed in range(seeds)]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, required=True, help="a CSV with the text and label columns")
    parser.add_argument("--text-column", default="text0")
    parser.add_argument("--label-column", default="label")
    parser.add_argument("--clusters", type=int, required=True)
    parser.add_argument("--seeds", type=int, default=20)
    parser.add_argument("--backbone", default="minilm")
    parser.add_argument("--max-length", type=int, default=32)
    args = parser.parse_args(argv)

    import pandas as pd
    import torch

    from textcore.encoding.encoder import EncoderSettings, TextEncoder

    frame = pd.read_csv(args.data)
    missing = {args.text_column, args.label_column} - set(frame.columns)
    if missing:
        raise SystemExit(f"error: {args.data} has no column {sorted(missing)}; its columns: {list(frame.columns)}")
    labels = pd.factorize(frame[args.label_column])[0]
    encoder = TextEncoder.from_name(args.backbone, EncoderSettings.outside_training(max_length=args.max_length)).eval()
    with torch.no_grad():
        embeddings = encoder.encode(frame[args.text_column].astype(str).tolist(), batch_size=256).float().numpy()
    single = single_init_accuracies(embeddings, labels, args.clusters, args.seeds)
    restarts = single_init_accuracies(embeddings, labels, args.clusters, min(args.seeds, 5), n_init=10)
    print(f"kmeans_single_init_spread: {args.data.name}, {len(frame)} texts, {args.backbone} (untrained), "
          f"K={args.clusters}")
    print(f"n_init=1, seeds 0-{args.seeds - 1}: ACC {' '.join(f'{a:.1f}' for a in single)}")
    print(f"n_init=1: mean {np.mean(single):.2f}, sd {np.std(single, ddof=1):.2f}, min {min(single):.1f}, "
          f"max {max(single):.1f}")
    print(f"n_init=10 (lowest inertia of 10), seeds 0-{len(restarts) - 1}: "
          f"ACC {' '.join(f'{a:.1f}' for a in restarts)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
