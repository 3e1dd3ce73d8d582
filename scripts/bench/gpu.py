"""Training-step speed at the papers' scale on a GPU (``make bench-gpu``): the GPU section of BENCHMARKS.md (between
its markers) is replaced, and the rows that estimates read (``launching.gpu_figures``: a run's GPU hours and memory)
are recorded as data in BENCHMARKS.json (part ``gpu``); a CPU run writes only to an explicit ``--out``. Four
benchmarks, one module each under scripts/bench/gpu_steps/ (what they share: ``shared.py``, the papers' backbones,
batches and texts, a timed step):

- ``raw_step``: every method, every precision, our step against the authors' layout, peak memory and model FLOPs
  utilisation (the main table);
- ``end_to_end`` (``--end-to-end``): ``Trainer.fit`` through ``run.train`` beside the raw step of the same layout;
- ``compiled_step`` (``--compile``): ``torch.compile`` of the backbone in steady state, compile time apart;
- ``host_syncs`` (``--count-syncs``): the host syncs CUDA reports in a few SCCL steps, printed only.

Usage: python scripts/bench/gpu.py [--methods sccl,aecl,clusterns,pairsupcon,clusterns_large]
       [--precisions fp32,tf32,bf16,fp16] [--steps 10] [--chunk-tokens 0,1024,8192] [--grad-cache 0,2048]
       python scripts/bench/gpu.py --compile default,max-autotune-no-cudagraphs,reduce-overhead --bucket 0,8 \
           --distinct-batches 8 --compile-only        (the compiled step alone)
       python scripts/bench/gpu.py --device cpu --tiny --out bench_gpu.md   (a check that it runs)
"""
from __future__ import annotations

import argparse
import datetime as dt
import json
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import torch  # noqa: E402

from launching import gpu_figures  # noqa: E402
from scripts.bench.gpu_steps import shared  # noqa: E402
from scripts.bench.gpu_steps.compiled_step import COMPILE_METHODS, compiled_rows, render_compiled  # noqa: E402
from scripts.bench.gpu_steps.end_to_end import E2E_METHODS, end_to_end, render_end_to_end  # noqa: E402
from scripts.bench.gpu_steps.host_syncs import count_syncs  # noqa: E402
from scripts.bench.gpu_steps.raw_step import raw_rows, render_raw  # noqa: E402
from scripts.bench.gpu_steps.shared import METHODS, PRECISIONS, ROOT, data_root  # noqa: E402

START, END = "<!-- bench-gpu:start -->", "<!-- bench-gpu:end -->"


def run(args) -> list[dict]:
    device = torch.device(args.device)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        if args.end_to_end:
            rows += end_to_end(args, device, Path(tmp))
        if args.compile:
            rows += compiled_rows(args, device, Path(tmp))
        methods = [] if args.end_to_end == "only" or args.compile_only else args.methods
        rows += raw_rows(args, methods, device, Path(tmp))
    return rows


def render(rows: list[dict], args) -> str:
    device = torch.device(args.device)
    card = torch.cuda.get_device_name(device) if device.type == "cuda" else "CPU"
    versions = f"torch {torch.__version__}" + (f", CUDA {torch.version.cuda}" if device.type == "cuda" else "")
    lines = [START, f"## GPU: paper-scale training steps ({card})", "",
             f"_Measured {dt.date.today().isoformat()}; {versions}; `python scripts/bench/gpu.py "
             + " ".join(sys.argv[1:]) + "`. Random-init backbones of the papers' architectures, max length 32._", ""]
    lines += render_raw(rows)
    lines += render_end_to_end([r for r in rows if r["layout"] == "end-to-end"])
    lines += render_compiled([r for r in rows if r["layout"] == "compiled"])
    return "\n".join(lines + ["", END])


def figure_rows(rows: list[dict]) -> list[dict]:
    """The rows estimates read (``launching.gpu_figures``): the project's raw step and the end-to-end rows, at the
    table's precision."""
    def tokens(value) -> str:
        return str(value) if value else "-"

    return [{"method": r["method"], "arch": r["arch"], "batch": r["batch"], "precision": r["precision"],
             "chunk": tokens(r.get("chunk_tokens")), "cached": tokens(r.get("grad_cache_tokens")),
             "end_to_end": r["layout"] == "end-to-end", "steps_per_s": round(r["steps_per_s"], 2),
             "peak_gib": None if r.get("peak_gib") is None or r["layout"] == "end-to-end" else round(r["peak_gib"], 1)}
            for r in rows if r["layout"] in ("ours", "end-to-end")]


def record_figures(rows: list[dict], args, path: Path = gpu_figures.BENCHMARKS) -> None:
    """The figures as data beside the other benchmarks' numbers (BENCHMARKS.json, part ``gpu``)."""
    results = json.loads(path.read_text()) if path.is_file() else {}
    card = torch.cuda.get_device_name(torch.device(args.device)) if torch.device(args.device).type == "cuda" else "CPU"
    results[gpu_figures.PART] = {"result": {"card": card, "rows": figure_rows(rows)},
                                 "meta": {"date": dt.date.today().isoformat(),
                                          "command": "python scripts/bench/gpu.py " + " ".join(sys.argv[1:])}}
    path.write_text(json.dumps(results, indent=1))


def main(argv=None) -> list[dict]:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--tiny", action="store_true", help="tiny backbones and batches: a check that it runs")
    parser.add_argument("--methods", default=",".join(METHODS))
    parser.add_argument("--precisions", default=",".join(PRECISIONS))
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--chunk-tokens", default="0,1024,8192")
    parser.add_argument("--grad-cache", default="0,2048", help="grad_cache_tokens values for extra rows (0: none)")
    parser.add_argument("--out", type=Path, default=None, help="default: BENCHMARKS.md (GPU runs only)")
    parser.add_argument("--end-to-end", nargs="?", const="also", choices=("also", "only"), default=None,
                        help="add Trainer.fit rows (sccl, aecl on StackOverflow); 'only': no raw table")
    parser.add_argument("--count-syncs", action="store_true",
                        help="only count CUDA's host syncs in a few SCCL steps (bf16) and print them")
    parser.add_argument("--e2e-methods", default=None,
                        help=f"methods of the end-to-end rows (default: those of --methods among {E2E_METHODS})")
    parser.add_argument("--e2e-steps", default="20,170", help="the two run lengths of an end-to-end row")
    parser.add_argument("--e2e-repeats", type=int, default=1, help="pairs of runs; the median difference counts")
    parser.add_argument("--e2e-variants", nargs="*", default=[], metavar="OVERRIDES",
                        help="more end-to-end rows, each with these run.py overrides (one quoted string per row, "
                        "e.g. 'encoder_compile=true'), beside the defaults' row; the runs alternate")
    parser.add_argument("--e2e-chunk", type=int, default=None, help="encoder_chunk_tokens of the end-to-end rows "
                        "(default: the last --chunk-tokens value)")
    parser.add_argument("--compile", default="", help="compiled-step rows in these torch.compile modes beside the "
                        "eager step, e.g. default,max-autotune-no-cudagraphs,reduce-overhead (CUDA graphs; GPU only)")
    parser.add_argument("--compile-methods", default="sccl", help=f"methods of the compiled rows ({COMPILE_METHODS})")
    parser.add_argument("--compile-only", action="store_true", help="no raw table (with --compile)")
    parser.add_argument("--compile-dynamic", action=argparse.BooleanOptionalAction, default=False,
                        help="dynamic shapes (one graph for all widths) instead of one graph per shape")
    parser.add_argument("--compile-backend", default="inductor", help="torch.compile backend (eager: a quick "
                        "check of the code path without code generation)")
    parser.add_argument("--bucket", default="0,8", help="the compiled rows' length buckets: every batch padded to a "
                        "multiple of this many tokens (0: to its longest text), an eager row for each")
    parser.add_argument("--compile-bucket", default=None, help="the buckets with compiled rows (default: all)")
    parser.add_argument("--distinct-batches", type=int, default=8, help="batches the compiled rows cycle through")
    parser.add_argument("--data-dir", type=Path, default=data_root() / "short_text",
                        help="folder with stackoverflow.csv (and wiki_sample.txt on a GPU machine: .gpu/data)")
    args = parser.parse_args(argv)
    args.methods = [m for m in args.methods.split(",") if m]
    args.precisions = [p for p in args.precisions.split(",") if p]
    args.chunk_tokens = [int(c) for c in args.chunk_tokens.split(",")]
    args.grad_cache = [int(g) for g in args.grad_cache.split(",")]
    args.e2e_steps = sorted(int(n) for n in args.e2e_steps.split(","))
    args.e2e_methods = args.methods if args.e2e_methods is None else [m for m in args.e2e_methods.split(",") if m]
    args.compile = [m for m in args.compile.split(",") if m]
    args.bucket = [int(b) for b in args.bucket.split(",") if b.strip()]
    args.compile_bucket = args.bucket if args.compile_bucket is None else [int(b) for b in
                                                                          args.compile_bucket.split(",") if b.strip()]
    args.compile_methods = [m for m in args.compile_methods.split(",") if m]
    shared.DATA_DIR = args.data_dir
    unknown = [m for m in args.methods if m not in METHODS] + [p for p in args.precisions if p not in PRECISIONS]
    if unknown:
        sys.exit(f"error: unknown method or precision {unknown}; methods {list(METHODS)}, precisions {PRECISIONS}")
    if args.count_syncs:
        with tempfile.TemporaryDirectory() as tmp:
            return [count_syncs(args, torch.device(args.device), Path(tmp))]
    if args.out is None and args.device == "cpu":
        sys.exit("error: a CPU run does not write BENCHMARKS.md's GPU section; pass --out <file>.")
    rows = run(args)
    section = render(rows, args)
    out = args.out or ROOT / "BENCHMARKS.md"
    text = out.read_text() if out.is_file() else ""
    if START in text:
        text = text[: text.index(START)] + section + text[text.index(END) + len(END):]
    else:
        text = text.rstrip("\n") + ("\n\n" if text else "") + section + "\n"
    out.write_text(text)
    if args.out is None:  # the project's own benchmarks: the figures that estimates read, as data
        record_figures(rows, args)
    print(section)
    return rows


if __name__ == "__main__":
    main()
