"""scripts/studies/aecl_side_by_side.py reads a seed run as the swap's two halves and tabulates both codes'
stage 3 from the same checkpoint. The run folders are written here by hand, in the layout run.py writes."""
from __future__ import annotations

import json

from tests.helpers import load_script

SBS = load_script("studies/aecl_side_by_side")


def _our_run(folder, head_acc: dict[int, float], confident: dict[int, float], sizes: dict[str, int]) -> None:
    """A finished run of ours: results.json's evaluation history, metrics.csv's confident share, predictions.csv."""
    (folder / "csv").mkdir(parents=True)
    history = [{"step": step, "head_acc": acc / 100, "kmeans_acc": 0.5} for step, acc in head_acc.items()]
    (folder / "results.json").write_text(json.dumps({"clustering": {"history": history}}))
    lines = ["step,train/confident_share"] + [f"{step},{share}" for step, share in confident.items()]
    (folder / "csv" / "metrics.csv").write_text("\n".join(lines) + "\n")
    rows = [f"{i},{i + 2},t,0,{c},0" for i, c in enumerate(c for c, n in sizes.items() for _ in range(n))]
    header = "row,line,text,kmeans_cluster,head_cluster,label"
    (folder / "predictions.csv").write_text("\n".join([header, *rows]) + "\n")


def _swap_runs(out, seed: int = 0) -> None:
    first, second, theirs = SBS.swap_paths(out, seed)
    _our_run(first, {100 * e: 20.0 + e for e in range(1, 6)}, {409: 0.5}, {"0": 3, "1": 1})
    # a resumed run's history also holds the epochs before its checkpoint (here with other values: must not be used)
    _our_run(second, {**{100 * e: 99.0 for e in range(1, 6)}, 600: 40.0, 700: 41.5}, {509: 0.8, 519: 0.6},
             {"0": 2, "1": 1, "2": 1})
    theirs.write_text(json.dumps({"epochs": [
        {"epoch": 5, "loaded": True, "head_acc": 25.5},
        {"epoch": 6, "head_acc": 30.0},
        {"epoch": 7, "head_acc": 28.0},
    ]}))


def test_a_seed_run_as_two_halves_reads_stage_3_from_the_resumed_run(tmp_path):
    _swap_runs(tmp_path)
    rows = SBS.ours_rows(tmp_path / "ours_s0")
    assert [r["epoch"] for r in rows] == [1, 2, 3, 4, 5, 6, 7]
    assert [round(r["head_acc"], 6) for r in rows] == [21.0, 22.0, 23.0, 24.0, 25.0, 40.0, 41.5]
    assert rows[4]["confident_share"] == 50.0  # step 409 is in epoch 5 (0-based 4)
    assert rows[5]["confident_share"] == 70.0  # the mean of steps 509 and 519 (epoch 6 = steps 500-599)
    assert rows[-1]["head_sizes"] == [2, 1, 1]  # the resumed run's final predictions


def test_the_swap_table_starts_each_code_from_its_evaluation_of_the_checkpoint(tmp_path):
    _swap_runs(tmp_path)
    lines = SBS.swap_table(tmp_path, [0, 1]).splitlines()  # seed 1 has no runs: no row
    assert lines[0] == ("| seed | draw | code | start (step 500) | end of epoch 6 | end of epoch 7 | stage 3 change "
                        "| max p⁰ >= 0.95 (%) |")
    assert lines[2:] == ["| 0 | 0 | ours | 25.00 | 40.00 | 41.50 | +16.50 | 70.0 / - |",
                         "| 0 | 0 | authors' | 25.50 | 30.00 | 28.00 | +2.50 | - / - |"]


def test_a_draw_is_stage_3_again_from_the_same_checkpoint(tmp_path):
    first, second, theirs = SBS.swap_paths(tmp_path, 0, draw=2)
    assert (first, second.name, theirs.name) == (SBS.swap_paths(tmp_path, 0)[0], "ours_s0_from_e5_draw2",
                                                  "authors_s0_from_ours_e5_draw2.json")
    _swap_runs(tmp_path)
    assert SBS.swap_table(tmp_path, [0], draws=(0, 2)).count("\n") == 3  # draw 2 has not run: no rows for it


def test_an_unfinished_half_leaves_the_seed_out(tmp_path):
    _swap_runs(tmp_path)
    first, second, _ = SBS.swap_paths(tmp_path, 0)
    (second / "predictions.csv").unlink()  # stopped before its end
    assert SBS.ours_rows(tmp_path / "ours_s0") is None
    assert SBS.swap_table(tmp_path, [0]).count("\n") == 1  # the header only


def test_the_authors_stage_3_counts_as_done_only_at_its_last_epoch(tmp_path):
    """authors_aecl.py writes its JSON after every epoch: a stopped run must be run again, not tabulated as done."""
    _swap_runs(tmp_path)
    _, _, theirs = SBS.swap_paths(tmp_path, 0)
    assert SBS._reached_last_epoch(theirs)
    rows = json.loads(theirs.read_text())
    rows["epochs"] = rows["epochs"][:2]  # stopped after epoch 6
    theirs.write_text(json.dumps(rows))
    assert not SBS._reached_last_epoch(theirs)
    assert not SBS._reached_last_epoch(tmp_path / "missing.json")
