"""``tools.py predict`` on the 1M-text scale corpus with each backend: the wall time of the command and whether the
output has the same columns and clusters as torch's (BENCHMARKS.md).

The corpus and the model are the scale part's (scripts/bench/scale.py): a tiny-backbone SCCL run of 20 steps on
10,000 generated texts, then 1,000,000 new generated texts (seed 1). The backends run one after the other, in the
order given, each as the command a user types.

Usage: python scripts/bench/scale_backends.py [--texts 1000000] [--backends torch,onnx-int8] [--output result.json]
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from scripts.bench.backends import print_result  # noqa: E402
from scripts.bench.scale import run_at, timed_process, user_command, write_corpus  # noqa: E402
from textcore.run_folder import RunFolder  # noqa: E402


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--texts", type=int, default=1_000_000)
    parser.add_argument("--backends", default="torch,onnx-int8")
    parser.add_argument("--output", type=Path, default=None)
    args = parser.parse_args(argv)
    import pandas as pd

    folder = ROOT / "logs" / "bench" / "scale"
    run = folder / "run_tiny_10000"
    if not RunFolder(run).results_file.is_file():  # the scale part's run, trained once
        run = run_at(10_000, folder, "tiny")["run"]
    new = folder / f"new_{args.texts}.csv"
    if not new.is_file():
        write_corpus(args.texts, new, seed=1)
    result = {"texts": args.texts, "run": str(Path(run).relative_to(ROOT)), "backends": {}}
    outputs = {}
    for backend in args.backends.split(","):
        outputs[backend] = folder / f"assigned_{args.texts}_{backend}.csv"
        command = [sys.executable, "tools.py", "predict", "--run", str(run), "--input", str(new), "--output",
                   str(outputs[backend]), "--backend", backend]
        print(f"predict {args.texts:,} texts, backend {backend} ...", file=sys.stderr, flush=True)
        measured = timed_process(command, folder / f"predict_{args.texts}_{backend}.log")
        result["backends"][backend] = {"command": user_command(command, folder), **measured}
        print(json.dumps(result["backends"][backend]), file=sys.stderr, flush=True)
    first, *rest = args.backends.split(",")
    reference = pd.read_csv(outputs[first], usecols=None)
    for backend in rest:
        other = pd.read_csv(outputs[backend])
        result["backends"][backend]["same_columns"] = list(other.columns) == list(reference.columns)
        result["backends"][backend]["cluster_agreement"] = float((other["cluster"] == reference["cluster"]).mean())
    return print_result(result, args.output)


if __name__ == "__main__":
    main()
