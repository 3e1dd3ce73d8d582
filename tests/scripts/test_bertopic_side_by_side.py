"""The BERTopic side-by-side study keeps rows of another number of UMAP fits apart from the default's
(scripts/studies/bertopic_side_by_side.py): a line written before ``umap.fits`` existed is a one-UMAP row."""
from __future__ import annotations

import json

from scripts.studies import bertopic_side_by_side as study
from textcore.cluster_space import SpaceSettings


def line(row: str, seed: int, acc: float, **extra) -> dict:
    return {"set": "tweet", "row": row, "seed": seed, "k": 89, "n": 2472, "max_texts": 0,
            row: {"acc": acc, "nmi": 0.5, "ari": 0.4, "clusters": 89, "outliers": 0, "seconds": 10.0}, **extra}


def test_a_line_of_another_number_of_fits_is_shown_under_its_own_row(tmp_path):
    default = SpaceSettings().fits
    assert default > 1  # the lines below without "fits" are one-UMAP lines, so not the default's
    lines = [line("kmeans", 0, 0.60),
             line("project_space", 0, 0.67, refine="linear"),  # written before umap.fits: one UMAP
             line("project_space", 0, 0.70, refine="linear", fits=default),
             line("project_space", 1, 0.72, refine="linear", fits=default)]
    (tmp_path / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in lines))

    assert study.shown(lines[0]) == lines[0]
    assert "project_space_fits1" in study.shown(lines[1]) and "project_space" not in study.shown(lines[1])
    assert study.shown(lines[2]) == lines[2]
    # the default's line and the one-UMAP line of the same seed are both kept: neither is "already run"
    assert ("tweet", "project_space", 0, 0, 1) in study.done_keys(tmp_path / "results.jsonl")
    assert ("tweet", "project_space", 0, 0, default) in study.done_keys(tmp_path / "results.jsonl")

    rows = {cells[2].strip(): cells[3].strip() for cells in
            (r.split("|") for r in study.table(tmp_path).splitlines()[2:])}
    default_label = dict(study.TABLE_ROWS)["project_space"]
    one_label = dict(study.TABLE_ROWS)["project_space_fits1"]
    assert rows[default_label] == "71.0 ± 1.4"  # seeds 0 and 1 of the default
    assert rows[one_label] == "67.0"
    assert rows["KMeans(K) on the embeddings"] == "60.0"


def test_a_trained_line_counts_only_where_its_steps_are_the_default_now():
    line = {"set": "tweet", "row": "project", "seed": 0, "n": 2472}
    assert not study.current(line)  # no steps named: 150, from before the 2-epoch end (78 steps on Tweet now)
    assert study.current({**line, "steps": 78})
    assert study.current({**line, "n": 20000})  # 150 steps then and now
    assert not study.current({**line, "n": 20000, "steps": 78})
    assert study.current({**line, "row": "kmeans"})  # untrained rows have no steps
