"""scripts/studies/kmeans_single_init_spread.py: the ACC of single-initialisation KMeans for several seeds, the
study behind docs/methods/aecl.md's note on AECL's stage-2 pseudo-labels."""
import numpy as np

from tests.helpers import load_script
from tests.helpers.data_files import write_csv

SPREAD = load_script("studies/kmeans_single_init_spread")


def test_separated_groups_are_found_by_every_seed_whatever_the_label_names():
    rng = np.random.default_rng(0)
    centres = np.array([[0.0, 0.0], [10.0, 0.0], [0.0, 10.0]])
    labels = np.repeat([2, 0, 1], 30)  # label names that are not the cluster numbers
    points = centres[np.repeat([0, 1, 2], 30)] + rng.normal(scale=0.1, size=(90, 2))
    assert SPREAD.single_init_accuracies(points, labels, clusters=3, seeds=4) == [100.0] * 4
    # two clusters for three groups: at most two of the three groups can be matched
    assert max(SPREAD.single_init_accuracies(points, labels, clusters=2, seeds=3)) <= 100 * 60 / 90 + 1e-9


def test_the_script_embeds_a_file_and_prints_one_accuracy_per_seed(tmp_path, capsys):
    rows = [[topic, f"{word} {topic} number {i}"] for i in range(12)
            for topic, word in (("sport", "football"), ("food", "pasta"))]
    data = write_csv(tmp_path / "two.csv", ["label", "text0"], rows)
    assert SPREAD.main(["--data", str(data), "--clusters", "2", "--seeds", "3", "--backbone", "tiny"]) == 0
    printed = capsys.readouterr().out.splitlines()
    assert printed[0].startswith("kmeans_single_init_spread: two.csv, 24 texts, tiny")
    accuracies = [float(x) for x in printed[1].split("ACC ")[1].split()]
    assert len(accuracies) == 3 and all(50.0 <= a <= 100.0 for a in accuracies)  # 2 balanced classes: ACC >= 50
    assert printed[3].startswith("n_init=10 (lowest inertia of 10), seeds 0-2:")
