"""The scale part of make bench (scripts/bench/scale.py): the generated corpus, the growth exponent, its section."""
import csv
from types import SimpleNamespace

import pytest

from tests.helpers import load_script

SCALE = load_script("bench/scale")
REPORT = load_script("bench/report")


def test_the_generated_corpus_is_seeded_and_balanced(tmp_path):
    a = SCALE.write_corpus(80, tmp_path / "a.csv")
    b = SCALE.write_corpus(80, tmp_path / "b.csv")
    c = SCALE.write_corpus(80, tmp_path / "c.csv", seed=1)
    assert a.read_text() == b.read_text() != c.read_text()
    rows = list(csv.DictReader(a.open()))
    labels = [r["label"] for r in rows]
    assert len(rows) == 80 and len(set(labels)) == 8 and all(labels.count(x) == 10 for x in set(labels))
    assert all(5 <= len(r["text"].split()) <= 14 for r in rows)


def test_the_growth_exponent_is_the_slope_in_log_log():
    assert SCALE.growth_exponent([10, 100, 1000], [2.0, 20.0, 200.0]) == pytest.approx(1.0)
    assert SCALE.growth_exponent([10, 100], [1.0, 100.0]) == pytest.approx(2.0)


def test_the_section_says_whether_each_target_is_met():
    def run(n, wall, gib):
        return {"texts": n, "backbone": "tiny", "wall_seconds": wall, "peak_gib": gib, "command": f"python run.py {n}",
                "phases": {"read": 1, "start_up": 2, "training": 3, "end": 4}, "evaluation": {"evaluations": 5}}

    def predicted(n, wall, gib):
        return {"texts": n, "wall_seconds": wall, "peak_gib": gib, "command": "python tools.py predict"}

    result = {"steps": 20, "every_n_steps": 10, "runs": [run(10_000, 20, 0.8), run(100_000, 40, 1.0),
                                                        run(1_000_000, 500, 3.0)],
              "exponent_fit": 0.9, "exponent_last": 1.1, "minilm": {**run(100_000, 1000, 2.0), "backbone": "minilm"},
              "predict": [predicted(10_000, 9, 1.0), predicted(1_000_000, 300, 1.3)]}
    meta = {"date": "2026-11-27", "load_start": 0.1, "load_end": 0.2, "seconds": 900}
    text = "\n".join(REPORT.render_scale(result, meta))
    assert "| tiny | 1,000,000 | 500 | 3.00 | 1 | 2 | 3 | 4 | 5 |" in text
    assert "from 100,000 to 1,000,000 texts: **1.10** (target <= 1.1: meets target)" in text
    assert "8.3 min, 3.00 GiB (target under 10 min and 4 GB: meets target)" in text
    assert "MiniLM at 100,000 texts: 16.7 min (target under 15 min: MISSES target)" in text
    assert "1.30x (target within 1.2x: MISSES target)" in text


def test_a_second_measurement_replaces_the_earlier_run_folder(tmp_path):
    earlier = tmp_path / "run_tiny_300"
    (earlier / "checkpoints").mkdir(parents=True)
    (earlier / "results.json").write_text('{"status": "finished"}')
    assert SCALE.fresh_run_folder(earlier) == earlier and not earlier.exists()
    assert SCALE.fresh_run_folder(tmp_path / "never_made") == tmp_path / "never_made"


@pytest.mark.slow
def test_the_part_runs_end_to_end_at_small_sizes(tmp_path, monkeypatch):
    monkeypatch.setattr(SCALE, "ROOT", SCALE.ROOT)  # runs from the repository, writes under logs/bench/scale
    result = SCALE.part_scale(SimpleNamespace(scale_sizes="300,600", scale_minilm=0))
    assert [r["texts"] for r in result["runs"]] == [300, 600] and result["runs"][-1]["final_texts"] == 600
    assert set(result["runs"][0]["phases"]) >= {"read", "start_up", "training", "end", "total"}
    assert [p["texts"] for p in result["predict"]] == [300, 600] and result["exponent_last"] is not None
