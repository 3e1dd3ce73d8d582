"""The corpus part of make bench (scripts/bench/corpus.py): its section in BENCHMARKS.md, and a small end-to-end run."""
from types import SimpleNamespace

import pytest

from tests.helpers import load_script

REPORT = load_script("bench/report")


def predicted(texts, processes, rate, peaks, threads=1, device="cpu"):
    return {"texts": texts, "accelerator": device.split(":")[0], "processes": processes, "threads": threads,
            "device": device, "wall_seconds": texts / rate + 10, "loop_seconds": texts / rate,
            "texts_per_second": rate, "peak_gib": peaks, "parts_mib": texts / 20_000, "text_shards_mib": 1.0,
            "command": f"python tools.py predict --devices {processes}"}


def test_the_section_gives_the_speed_up_the_memory_ratio_and_the_gpu_efficiency():
    result = {"model": "SCCL, tiny", "cpu": [predicted(1_000_000, 1, 5000, [0.60]),
                                            predicted(1_000_000, 2, 9000, [0.62, 0.55]),
                                            predicted(1_000_000, 1, 4000, [0.61], threads=None),
                                            predicted(10_000_000, 2, 9500, [0.80, 0.56])],
              "gpu": [predicted(1_000_000, 1, 40_000, [2.0], None, "cuda:0"),
                      predicted(1_000_000, 4, 120_000, [2.0] * 4, None, "cuda:0")], "gpu_name": "H100"}
    meta = {"date": "2026-11-27", "load_start": 0.1, "load_end": 0.2, "seconds": 900}
    text = "\n".join(REPORT.render_corpus(result, meta))
    expected = ("| cpu | 2 | 1 | 1,000,000 | 121 | 9,000 | 4,500 | 0.62, 0.55 | 50 |",  # 9,000 / 2 per process
                "| cpu | 1 | default | 1,000,000 |",
                "one thread each): 1.80x the texts/s",  # 9,000 / 5,000
                "10,000,000 against 1,000,000 texts on 2 processes: 1.29x (target within 1.2x: MISSES target)",
                "H100: 4 GPUs give 75% of 4 x one GPU's texts/s")  # 120,000 / (4 x 40,000)
    assert [line for line in expected if line not in text] == []
    no_gpu = "\n".join(REPORT.render_corpus({**result, "gpu": []}, meta))
    assert "No GPU on this machine" in no_gpu


@pytest.mark.slow
def test_the_part_runs_end_to_end_at_small_sizes():
    corpus = load_script("bench/corpus")
    result = corpus.part_corpus(SimpleNamespace(corpus_sizes="3000,6000"))
    cpu = result["cpu"]
    assert [(p["texts"], p["processes"]) for p in cpu] == [(3000, 1), (3000, 2), (3000, 1), (6000, 2)]
    assert all(len(p["peak_gib"]) == p["processes"] and p["texts_per_second"] > 0 for p in cpu)
