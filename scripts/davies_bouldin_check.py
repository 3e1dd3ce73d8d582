"""Davies-Bouldin of one K = 30 partition of SearchSnippets three ways: torchmetrics, scikit-learn and the
project's (evaluation/clustering/label_free.py), the check behind RESULTS.md "Without labels".

    .venv/bin/python scripts/davies_bouldin_check.py [--data-dir data/short_text]

The partition is the one ``evaluation.clustering.choose_k`` fits at K = 30 (untrained minilm, the seeded 5000-text
sample, the best of KMeans seeds 0-4).
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from datamodules.download.catalogue import data_root  # noqa: E402
from evaluation.clustering.choose_k import embed_texts, read_texts  # noqa: E402
from evaluation.clustering.label_free import davies_bouldin  # noqa: E402
from lightning_modules.shared.kmeans import kmeans_fit  # noqa: E402


def main(argv=None) -> dict:
    from sklearn.metrics import davies_bouldin_score
    from torchmetrics.functional.clustering import davies_bouldin_score as torchmetrics_davies_bouldin

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data-dir", type=Path, default=data_root() / "short_text")
    args = parser.parse_args(argv)
    texts = read_texts(args.data_dir / "searchsnippets.csv", "text0", None)
    x = np.asarray(embed_texts(texts, "minilm", None, None, 256, None), dtype=np.float32)
    x = x[np.sort(np.random.default_rng(0).choice(len(x), 5000, replace=False))]  # choose_k's sample
    labels = min((kmeans_fit(x, 30, seed, 1, None) for seed in range(5)), key=lambda f: f.inertia_).labels_
    scores = {
        "torchmetrics": float(torchmetrics_davies_bouldin(torch.as_tensor(x, dtype=torch.float64),
                                                          torch.as_tensor(labels))),
        "scikit-learn": float(davies_bouldin_score(x.astype(np.float64), labels)),
        "project": davies_bouldin(x, labels),
    }
    print("Davies-Bouldin, SearchSnippets, K = 30: " + ", ".join(f"{k} {v:.2f}" for k, v in scores.items()))
    return scores


if __name__ == "__main__":
    main()
