"""Training-step speed at the papers' scale on a GPU: every method, every precision, our step against the
authors' layout, peak memory and model FLOPs utilisation (``make bench-gpu``).

Backbones are randomly initialised from the papers' architectures (no download; a random model costs what
the trained one costs): DistilBERT-base for SCCL and AECL at batch 400, BERT-base for ClusterNS at 256 and
PairSupCon at 1024, BERT-large for ClusterNS at 128 per GPU (the authors' 4 x 128). Texts are real
(StackOverflow's short texts, the Wikipedia sample for ClusterNS), max length 32, the offline MiniLM tokenizer
(the BERT uncased vocabulary).

For each row: ``ours`` is the project's step (length-sorted chunks, the views in one call; optionally cached
gradients); ``authors`` is the encoder layout of the authors' code (every view padded to 32 and run in its own
call) with this project's losses, which agree with theirs (the loss code costs little beside the encoder; SCCL's
whole step as the authors compute it is in scripts/bench.py, CPU); both under the same precision:

- ``fp32``: float32, true float32 matrix products; ``tf32``: float32 with TF32 products;
- ``bf16`` / ``fp16``: autocast mixed precision (fp16 with a gradient scaler), float32 weights.

Steps/s over ``--steps`` timed steps after ``--warmup``; tokens/s counts the texts' real tokens; MFU is
6 x backbone parameters x real tokens per second against the card's dense peak for the precision
(``PEAK_TFLOPS``). The GPU section of BENCHMARKS.md (between its markers) is replaced; a CPU run writes only
to an explicit ``--out``.

Usage: python scripts/bench_gpu.py [--methods sccl,aecl,clusterns,pairsupcon,clusterns_large]
       [--precisions fp32,tf32,bf16,fp16] [--steps 10] [--chunk-tokens 0,1024,8192] [--grad-cache 0,2048]
       python scripts/bench_gpu.py --device cpu --tiny --out /tmp/bench_gpu.md   (a check that it runs)
"""
from __future__ import annotations

import argparse
import contextlib
import csv
import datetime as dt
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("PROJECT_ROOT", str(ROOT))
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import torch  # noqa: E402

START, END = "<!-- bench-gpu:start -->", "<!-- bench-gpu:end -->"
# dense peak TFLOP/s (no sparsity) by card and precision: vendors' data sheets
PEAK_TFLOPS = {
    "H100": {"fp32": 67, "tf32": 495, "bf16": 989, "fp16": 989},
    "H200": {"fp32": 67, "tf32": 495, "bf16": 989, "fp16": 989},
    "A100": {"fp32": 19.5, "tf32": 156, "bf16": 312, "fp16": 312},
    "V100": {"fp32": 15.7, "tf32": 15.7, "bf16": 15.7, "fp16": 125},
    "3090": {"fp32": 35.6, "tf32": 71, "bf16": 71, "fp16": 71},
}
ARCHITECTURES = {  # transformers config class, its arguments (paper scale / --tiny)
    "distilbert-base": ("DistilBertConfig", {}, {"dim": 32, "n_layers": 2, "n_heads": 2, "hidden_dim": 64}),
    "bert-base": ("BertConfig", {}, {"hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 2,
                                     "intermediate_size": 64}),
    "bert-large": ("BertConfig", {"hidden_size": 1024, "num_hidden_layers": 24, "num_attention_heads": 16,
                                  "intermediate_size": 4096},
                   {"hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 2, "intermediate_size": 64}),
}
METHODS = {  # method, architecture, batch (paper), batch (--tiny), text source
    "sccl": ("distilbert-base", 400, 8, "short"),
    "aecl": ("distilbert-base", 400, 8, "short"),
    "clusterns": ("bert-base", 256, 8, "wiki"),
    "pairsupcon": ("bert-base", 1024, 8, "short"),
    "clusterns_large": ("bert-large", 128, 8, "wiki"),
}
PRECISIONS = ("fp32", "tf32", "bf16", "fp16")


def card_peak(device: torch.device, precision: str) -> float | None:
    if device.type != "cuda":
        return None
    name = torch.cuda.get_device_name(device)
    return next((p[precision] for key, p in PEAK_TFLOPS.items() if key in name), None)


def backbone_folder(arch: str, tiny: bool, root: Path) -> Path:
    """A randomly initialised backbone of ``arch`` saved with the MiniLM tokenizer (``backbone=<folder>``)."""
    import transformers

    from lightning_modules.shared.encoder import load_tokenizer

    folder = root / (arch + ("-tiny" if tiny else ""))
    if not (folder / "config.json").is_file():
        name, paper, small = ARCHITECTURES[arch]
        tokenizer = load_tokenizer("tiny")
        config = getattr(transformers, name)(vocab_size=len(tokenizer), **(small if tiny else paper))
        torch.manual_seed(0)
        transformers.AutoModel.from_config(config).save_pretrained(folder)
        tokenizer.save_pretrained(folder)
    return folder


def texts(kind: str, n: int) -> tuple[list[str], list[str]]:
    data = ROOT.parent / "shared" / "data"
    if kind == "wiki":
        lines = [line.strip() for line in (data / "wiki" / "wiki_sample.txt").open(encoding="utf-8") if line.strip()]
        return lines[:n], lines[n:2 * n]
    with (data / "short_text" / "stackoverflow.csv").open(encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))[:n]
    return [r["text0"] for r in rows], [r["text1"] for r in rows]


def build(method: str, folder: Path, batch: int, kind: str, device: torch.device, layout: str, chunk: int,
          grad_cache: int):
    """The module and one training batch; ``layout`` ours (chunked, views in one call) or authors (padded)."""
    a, b = texts(kind, batch)
    authors = layout == "authors"
    settings = {"backbone": str(folder), "chunk_tokens": 0 if authors else chunk, "concat_views": not authors,
                "grad_cache_tokens": 0 if authors else grad_cache}
    name = "clusterns" if method.startswith("clusterns") else method
    if name == "sccl":
        from lightning_modules.sccl.module import SCCL

        module = SCCL(num_clusters=20, **settings)
        module.set_centroids(torch.randn(20, module.encoder.dim))
    elif name == "aecl":
        from lightning_modules.aecl.module import AECL

        module = AECL(num_clusters=20, **settings)
    elif name == "clusterns":
        from lightning_modules.clusterns.module import ClusterNS

        # the learning-rate schedule needs a Trainer and does not change a step's cost
        module = ClusterNS(num_clusters=min(128, batch), kmean_cosine=1.0, lr_schedule="constant", **settings)
    else:
        from lightning_modules.pairsupcon.module import PairSupCon

        module = PairSupCon(**settings)
    tok = lambda xs: module.encoder.tokenize(xs, pad_to_max=authors)  # noqa: E731
    if name == "pairsupcon":
        batch_data = {"s1": tok(a), "s2": tok(b), "labels": torch.tensor([1, 0] * (batch // 2))}
    elif name == "clusterns":
        batch_data = {"index": torch.arange(batch), "original": tok(a)}
    else:
        batch_data = {"index": torch.arange(batch), "view1": tok(b), "view2": tok(a[::-1])}
        if name == "sccl":
            batch_data["original"] = tok(a)
    module.log = lambda *args, **kwargs: None
    module.to(device).train()
    batch_data = {k: ({kk: vv.to(device) for kk, vv in v.items()} if hasattr(v, "items") else v.to(device))
                  for k, v in batch_data.items()}
    real_tokens = sum(int(v["attention_mask"].sum()) for v in batch_data.values() if hasattr(v, "items"))
    return module, batch_data, real_tokens


@contextlib.contextmanager
def precision_context(precision: str, device: torch.device):
    torch.set_float32_matmul_precision("high" if precision == "tf32" else "highest")
    if precision in ("bf16", "fp16"):
        dtype = torch.bfloat16 if precision == "bf16" else torch.float16
        with torch.autocast(device.type, dtype=dtype):
            yield
    else:
        yield


def measure(module, batch, precision: str, device: torch.device, steps: int, warmup: int) -> dict:
    optimizer = module.configure_optimizers()
    optimizer = optimizer["optimizer"] if isinstance(optimizer, dict) else optimizer
    scaler = torch.amp.GradScaler(device.type, enabled=precision == "fp16")
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    times, losses = [], []
    for i in range(warmup + steps):
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        start = time.perf_counter()
        optimizer.zero_grad(set_to_none=True)
        with precision_context(precision, device):
            loss = module.training_step(batch, i)
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        if i >= warmup:
            times.append(time.perf_counter() - start)
            losses.append(float(loss.detach()))
    peak = torch.cuda.max_memory_allocated(device) / 2**30 if device.type == "cuda" else None
    return {"seconds": sum(times) / len(times), "peak_gib": peak, "loss": losses[-1]}


def run(args) -> list[dict]:
    device = torch.device(args.device)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for method in args.methods:
            arch, paper_batch, tiny_batch, kind = METHODS[method]
            folder = backbone_folder(arch, args.tiny, Path(tmp))
            batch = tiny_batch if args.tiny else paper_batch
            params = None
            variants = [("authors", 0, 0)] + [("ours", c, 0) for c in args.chunk_tokens] + \
                       [("ours", args.chunk_tokens[-1], g) for g in args.grad_cache if g]
            for precision in args.precisions:
                if precision in ("tf32",) and device.type != "cuda":
                    continue  # TF32 exists on NVIDIA GPUs only
                for layout, chunk, grad_cache in variants:
                    torch.manual_seed(0)
                    module, data, tokens = build(method, folder, batch, kind, device, layout, chunk, grad_cache)
                    params = params or sum(p.numel() for p in module.encoder.backbone.parameters())
                    result = measure(module, data, precision, device, args.steps, args.warmup)
                    peak = card_peak(device, precision)
                    flops = 6 * params * tokens / result["seconds"]
                    rows.append({"method": method, "arch": arch, "batch": batch, "precision": precision,
                                 "layout": layout, "chunk_tokens": chunk, "grad_cache_tokens": grad_cache,
                                 "steps_per_s": 1 / result["seconds"], "tokens_per_s": tokens / result["seconds"],
                                 "peak_gib": result["peak_gib"], "loss": result["loss"],
                                 "mfu": flops / (peak * 1e12) if peak else None})
                    print(f"bench_gpu: {rows[-1]}", file=sys.stderr, flush=True)
                    del module, data
                    if device.type == "cuda":
                        torch.cuda.empty_cache()
    return rows


def render(rows: list[dict], args) -> str:
    device = torch.device(args.device)
    card = torch.cuda.get_device_name(device) if device.type == "cuda" else "CPU"
    versions = f"torch {torch.__version__}" + (f", CUDA {torch.version.cuda}" if device.type == "cuda" else "")
    lines = [START, f"## GPU: paper-scale training steps ({card})", "",
             f"_Measured {dt.date.today().isoformat()}; {versions}; `python scripts/bench_gpu.py "
             + " ".join(sys.argv[1:]) + "`. Random-init backbones of the papers' architectures, max length 32._", "",
             "| method | backbone, batch | precision | layout | chunk tokens | cached | steps/s | tokens/s | "
             "peak GiB | MFU | vs authors |", "|---" * 11 + "|"]
    for row in rows:
        base = next(r for r in rows if r["method"] == row["method"] and r["precision"] == row["precision"]
                    and r["layout"] == "authors")
        peak = "-" if row["peak_gib"] is None else f"{row['peak_gib']:.1f}"
        mfu = "-" if row["mfu"] is None else f"{100 * row['mfu']:.0f} %"
        lines.append(f"| {row['method']} | {row['arch']}, {row['batch']} | {row['precision']} | {row['layout']} | "
                     f"{row['chunk_tokens'] or '-'} | {row['grad_cache_tokens'] or '-'} | {row['steps_per_s']:.2f} | "
                     f"{row['tokens_per_s']:.0f} | {peak} | {mfu} | "
                     f"{row['steps_per_s'] / base['steps_per_s']:.2f}x |")
    return "\n".join(lines + ["", END])


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
    args = parser.parse_args(argv)
    args.methods = [m for m in args.methods.split(",") if m]
    args.precisions = [p for p in args.precisions.split(",") if p]
    args.chunk_tokens = [int(c) for c in args.chunk_tokens.split(",")]
    args.grad_cache = [int(g) for g in args.grad_cache.split(",")]
    unknown = [m for m in args.methods if m not in METHODS] + [p for p in args.precisions if p not in PRECISIONS]
    if unknown:
        sys.exit(f"error: unknown method or precision {unknown}; methods {list(METHODS)}, precisions {PRECISIONS}")
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
    print(section)
    return rows


if __name__ == "__main__":
    main()
