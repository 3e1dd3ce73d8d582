"""scripts/bench/report.py renders BENCHMARKS.md again: bench.py's parts, the notes, and the sections other
scripts wrote between markers, kept or replaced from a file."""
import json

from tests.helpers import load_script

REPORT = load_script("bench/report")
GPU_OLD = "<!-- bench-gpu:start -->\n## GPU (old card)\n| method | steps/s |\n<!-- bench-gpu:end -->"
GPU_NEW = "<!-- bench-gpu:start -->\n## GPU (new card)\n| method | steps/s |\n<!-- bench-gpu:end -->"
CACHE = "<!-- grad-cache:start -->\n## Cached gradients\n<!-- grad-cache:end -->"


def memory_part() -> dict:
    run = {"peak_gib": 1.5, "wall_seconds": 100.0, "command": "run.py x"}
    return {"machine": "a test CPU", "memory": {"result": {"steps": 20, "runs": {"1024": run, "0": run}},
                                                 "meta": {"date": "2026-01-02", "load_start": 0.5, "load_end": 0.7,
                                                          "seconds": 12.0}}}


def test_kept_sections_stay_in_order_around_the_notes(tmp_path):
    previous = f"# Benchmarks\nstale text\n\n{CACHE}\n\nhand-written text\n\n{GPU_OLD}\n"
    text = REPORT.document(memory_part(), previous)
    assert "stale text" not in text and "hand-written text" not in text  # only the sources count
    notes = REPORT.NOTES.read_text().strip()
    assert text.index("_Measured 2026-01-02") < text.index(CACHE) < text.index(notes) < text.index(GPU_OLD)


def test_a_section_file_replaces_the_kept_one_of_the_same_name(tmp_path):
    (tmp_path / "BENCHMARKS.json").write_text(json.dumps(memory_part()))
    out = tmp_path / "BENCHMARKS.md"
    out.write_text(f"{CACHE}\n{GPU_OLD}\n")
    section = tmp_path / "bench_gpu.md"
    section.write_text(f"OUTPUT-BEFORE\n{GPU_NEW}\nOUTPUT-AFTER\n")
    assert REPORT.main(["--out", str(out), "--section", str(section)]) == 0
    text = out.read_text()
    assert GPU_NEW in text and "old card" not in text and "OUTPUT-" not in text and CACHE in text
