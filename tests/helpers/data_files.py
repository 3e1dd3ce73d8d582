"""Tiny generated data files for the pairing and bad-input tests, and where the shared benchmark data lies."""
from __future__ import annotations

import csv
import random
from pathlib import Path

TOPICS = {
    "food": ["pasta", "sauce", "bake", "bread", "oven", "soup", "garlic", "recipe", "salt", "butter"],
    "space": ["planet", "orbit", "telescope", "galaxy", "comet", "rocket", "star", "moon", "nasa", "mars"],
    "code": ["python", "compiler", "bug", "function", "loop", "array", "server", "thread", "cache", "stack"],
    "sport": ["goal", "match", "coach", "league", "score", "team", "stadium", "player", "cup", "ball"],
}

ROOT = Path(__file__).resolve().parents[2]
SHARED_DATA = ROOT.parent / "shared" / "data"  # the benchmark data beside the repository (CI puts it there)


def short_texts(n_per_topic: int = 10, topics: int = 4, seed: int = 0) -> list[tuple[str, str, str]]:
    """(label, text, augmentation) rows, topics x n_per_topic, distinct texts."""
    rng = random.Random(seed)
    names = list(TOPICS)
    rows = []
    for t in range(topics):
        label = names[t % len(names)] + ("" if t < len(names) else str(t))
        words = TOPICS[names[t % len(names)]]
        for i in range(n_per_topic):
            text = " ".join(rng.sample(words, 4)) + f" {label} {i}"
            rows.append((label, text, " ".join(text.split()[1:])))
    rng.shuffle(rows)
    return rows


def write_short_text_csv(path: Path, header=("label", "text0", "text1"), n_per_topic: int = 10,
                         topics: int = 4) -> Path:
    with open(path, "w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(header)
        writer.writerows(short_texts(n_per_topic, topics))
    return path


def write_wiki(path: Path, n: int = 80) -> Path:
    rng = random.Random(1)
    words = [w for ws in TOPICS.values() for w in ws]
    path.write_text("".join(" ".join(rng.sample(words, 7)) + f" {i}\n" for i in range(n)), encoding="utf-8")
    return path


def write_nli(path: Path, n: int = 30, labels=("entailment", "contradiction", "neutral")) -> Path:
    rng = random.Random(2)
    words = [w for ws in TOPICS.values() for w in ws]
    with open(path, "w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(["sentence1", "sentence2", "gold_label"])
        for i in range(n):
            writer.writerow([" ".join(rng.sample(words, 6)), " ".join(rng.sample(words, 5)), labels[i % len(labels)]])
    return path


def write_stsb(root: Path, n: int = 16) -> Path:
    """SentEval's STS-B dev and test files (enough for the STS callbacks); returns the 'downstream' root."""
    rng = random.Random(3)
    words = "a small cat sat on the mat while dog ran in park".split()
    folder = root / "STS" / "STSBenchmark"
    folder.mkdir(parents=True, exist_ok=True)
    for split in ("dev", "test"):
        rows = [f"g\tf\ty\t{i:04d}\t{rng.uniform(0, 5):.2f}\t{' '.join(rng.sample(words, 5))}\t"
                f"{' '.join(rng.sample(words, 5))}" for i in range(n)]
        (folder / f"sts-{split}.csv").write_text("\n".join(rows) + "\n", encoding="utf-8")
    return root


# overrides that keep a one-step run fast without changing what is run
FAST = [
    "backbone=tiny",
    "trainer.max_steps=1",
    "trainer.enable_progress_bar=false",
    "~callbacks.progress",
    "~callbacks.model_summary",
    "callbacks.report.plots=false",
    "print_table=false",
]


def write_csv(path: Path, header: list[str], rows: list[list]) -> Path:
    with open(path, "w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(header)
        writer.writerows(rows)
    return path


TOPIC_WORDS = {
    "food": ["pasta", "sauce", "bake", "bread", "oven", "soup", "garlic", "recipe"],
    "space": ["planet", "orbit", "telescope", "galaxy", "comet", "rocket", "star", "moon"],
    "code": ["python", "compiler", "bug", "function", "loop", "array", "server", "thread"],
}


def toy_rows(rng) -> list[list[str]]:
    """[label, text, augmentation] rows: 3 topics x 12 texts of 4 topic words and a number, in topic order
    (``rng``: a ``random.Random``)."""
    rows = []
    for label, words in TOPIC_WORDS.items():
        for i in range(12):
            text = " ".join(rng.sample(words, 4)) + f" {i}"
            rows.append([label, text, " ".join(text.split()[1:])])
    return rows
