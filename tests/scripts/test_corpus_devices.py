"""The corpus part of the GPU session (scripts/bench/corpus_devices.py): its table, from numbers written by hand."""
from tests.helpers import load_script

DEVICES = load_script("bench/corpus_devices")


def test_the_table_gives_the_gpu_against_the_cpu_for_predict_and_kmeans():
    def predicted(accelerator, device, rate):
        return {"accelerator": accelerator, "device": device, "texts": 200_000, "wall_seconds": 200_000 / rate + 5,
                "texts_per_second": rate, "peak_gib": [1.5], "command": f"tools.py predict --accelerator {accelerator}"}

    result = {"predict": [predicted("cpu", "cpu", 8_000), predicted("gpu", "cuda:0", 120_000)],
              "kmeans": [{"backend": "fast", "device": "cpu", "rows": 1_000_000, "clusters": 100, "fitted_on": 50_000,
                          "seconds": 12.5, "inertia": 1.0},
                         {"backend": "torch", "device": "cuda:0", "rows": 1_000_000, "clusters": 100,
                          "fitted_on": 50_000, "seconds": 0.4, "inertia": 1.0}]}
    text = DEVICES.render(result, "NVIDIA H100")
    expected = ("### Passes over a corpus: GPU against CPU (NVIDIA H100)",
                "| cuda:0 | 200,000 | 7 | 120,000 | 1.50 |",  # 200,000 / 120,000 + 5 s
                "One GPU against one CPU process with every core: 15.0x the texts/s.",  # 120,000 / 8,000
                "| fast | cpu | 1,000,000 | 100 | 50,000 | 12.50 |",
                "| torch | cuda:0 | 1,000,000 | 100 | 50,000 | 0.40 |")
    assert [line for line in expected if line not in text] == []
    cpu_only = DEVICES.render({"predict": result["predict"][:1], "kmeans": result["kmeans"][:1]}, "CPU only")
    assert "One GPU against" not in cpu_only and "cuda" not in cpu_only
