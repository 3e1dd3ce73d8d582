"""scripts/studies/label_free_report.py's K table: each criterion's pick from choose_k.json, against the number of
classes counted from the file's label column (which the tool never read). Its step table is tested in
tests/evaluation/clustering/test_label_free.py."""
import json

from tests.helpers import load_script
from tests.helpers.data_files import write_csv

REPORT = load_script("studies/label_free_report")


def scan(folder, name: str, best: dict[str, int], hdbscan: dict) -> None:
    """A choose_k.json whose rows make ``best[criterion]`` that criterion's pick."""
    rows = []
    for k in (2, 4, 8, 16):
        rows.append({"k": k, "silhouette": 1.0 if k == best["silhouette"] else 0.1,
                     "calinski_harabasz": 9.0 if k == best["calinski_harabasz"] else 1.0,
                     "davies_bouldin": 0.5 if k == best["davies_bouldin"] else 3.0,
                     "stability": 0.9 if k == best["stability"] else 0.2})
    (folder / name).mkdir(parents=True)
    (folder / name / "choose_k.json").write_text(json.dumps({"texts": 40, "rows": rows, "hdbscan": hdbscan}))


def test_each_criterion_s_pick_beside_the_true_k(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    write_csv(data / "four.csv", ["label", "text0"], [[str(i % 4), f"text {i}"] for i in range(40)])
    write_csv(data / "sixteen.csv", ["label", "text0"], [[str(i % 16), f"text {i}"] for i in range(40)])
    scans = tmp_path / "choose_k"
    scan(scans, "four", {"silhouette": 4, "calinski_harabasz": 2, "davies_bouldin": 16, "stability": 8},
         {"clusters": 3, "noise_share": 0.25})
    scan(scans, "sixteen", {"silhouette": 2, "calinski_harabasz": 2, "davies_bouldin": 16, "stability": 4},
         {"clusters": None})
    table = REPORT.choose_k_table(scans, data)
    assert "| four | 40 | 4 | **4** | 2 | 16 | 8 | 3 (25 %) |" in table
    assert "| sixteen | 40 | 16 | **2** | 2 | 16 | 4 | - |" in table
    # silhouette picked 4/4 and 2/16: one set of two within a factor 2; the median ratio of (1.0, 0.125)
    assert "within a factor 2 of the true K: 1 of 2 sets; median ratio recommended / true 1.00." in table
