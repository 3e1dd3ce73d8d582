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
whole step as the authors compute it is in scripts/bench/bench.py, CPU); both under the same precision:

- ``fp32``: float32, true float32 matrix products; ``tf32``: float32 with TF32 products;
- ``bf16`` / ``fp16``: autocast mixed precision (fp16 with a gradient scaler), float32 weights.

Steps/s over ``--steps`` timed steps after ``--warmup``; tokens/s counts the texts' real tokens; MFU is
6 x backbone parameters x real tokens per second against the card's dense peak for the precision
(``PEAK_TFLOPS``). The GPU section of BENCHMARKS.md (between its markers) is replaced; a CPU run writes only
to an explicit ``--out``.

``--compile`` adds the compiled step in steady state: ``torch.compile`` of the backbone in each given mode,
beside the eager step, cycling through ``--distinct-batches`` different batches (so the widths vary as in training),
one padded call a step (static shapes: CUDA graphs can apply), optionally with every batch padded to a multiple of
``--bucket`` tokens so that few shapes occur. The first pass over the batches (where every shape compiles) is
reported apart: compile seconds = its time less the steady step time it would have taken; steady steps/s after
``--warmup`` passes; break-even = the steps after which compiling has paid for itself. The ``vs plain`` column of
the raw table is each cached-gradients row against the same step without them.

Usage: python scripts/bench/gpu.py [--methods sccl,aecl,clusterns,pairsupcon,clusterns_large]
       [--precisions fp32,tf32,bf16,fp16] [--steps 10] [--chunk-tokens 0,1024,8192] [--grad-cache 0,2048]
       python scripts/bench/gpu.py --compile default,max-autotune-no-cudagraphs,reduce-overhead --bucket 0,8 \
           --distinct-batches 8 --compile-only        (the compiled step alone)
       python scripts/bench/gpu.py --device cpu --tiny --out bench_gpu.md   (a check that it runs)
"""
from __future__ import annotations

import argparse
import collections
import contextlib
import csv
import datetime as dt
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("PROJECT_ROOT", str(ROOT))
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import torch  # noqa: E402

from datamodules.download.catalogue import data_root  # noqa: E402

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

    from textcore.encoding.backbone import load_tokenizer

    folder = root / (arch + ("-tiny" if tiny else ""))
    if not (folder / "config.json").is_file():
        name, paper, small = ARCHITECTURES[arch]
        tokenizer = load_tokenizer("tiny")
        config = getattr(transformers, name)(vocab_size=len(tokenizer), **(small if tiny else paper))
        torch.manual_seed(0)
        transformers.AutoModel.from_config(config).save_pretrained(folder)
        tokenizer.save_pretrained(folder)
    return folder


def method_backbone(method: str, tiny: bool, root: Path) -> tuple[str, Path, int, str]:
    """A method's architecture, its random-init backbone (``backbone_folder``), its batch (the paper's or
    ``--tiny``'s) and its text source."""
    arch, paper_batch, tiny_batch, kind = METHODS[method]
    return arch, backbone_folder(arch, tiny, root), tiny_batch if tiny else paper_batch, kind


def method_precisions(args, methods: list[str], device: torch.device, root: Path):
    """(method, architecture, backbone folder, batch, text source, precision) of each group of rows: every method
    in turn with every ``--precisions`` value the device runs (TF32 exists on NVIDIA GPUs only)."""
    for method in methods:
        arch, folder, batch, kind = method_backbone(method, args.tiny, root)
        for precision in args.precisions:
            if precision != "tf32" or device.type == "cuda":
                yield method, arch, folder, batch, kind, precision


# where the texts are: the project's data folder (datamodules.download), or one flat folder (a GPU machine's
# .gpu/data: --data-dir)
DATA_FILES = {"wiki": ("wiki", "wiki_sample.txt"), "short": ("short_text", "stackoverflow.csv"),
              "nli": ("nli", "nli_sample.csv")}
DATA_DIR: Path | None = None


def data_file(kind: str) -> Path:
    folder, name = DATA_FILES[kind]
    if DATA_DIR is not None and (DATA_DIR / name).is_file():
        return DATA_DIR / name
    return data_root() / folder / name


def texts(kind: str, n: int) -> tuple[list[str], list[str]]:
    if kind == "wiki":
        lines = [line.strip() for line in data_file(kind).open(encoding="utf-8") if line.strip()]
        return lines[:n], lines[n:2 * n]
    with data_file(kind).open(encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))[:n]
    return [r["text0"] for r in rows], [r["text1"] for r in rows]


def build(method: str, folder: Path, batch: int, kind: str, device: torch.device, layout: str, chunk: int,
          grad_cache: int, views: int = 3):
    """The module and one training batch; ``layout`` ours (chunked, views in one call) or authors (padded).
    ``views``: SCCL's encoder views, 3 (an original beside two augmentations) or 2 (the first augmentation is
    the original, as in a run on StackOverflow's one augmentation column: the end-to-end row's layout)."""
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
    from textcore.encoding.token_batches import with_token_counts

    # token counts made on the host, as the collators make them (the encoder then reads nothing back)
    tok = lambda xs: with_token_counts(module.encoder.tokenize(xs, pad_to_max=authors))  # noqa: E731
    if name == "pairsupcon":
        batch_data = {"s1": tok(a), "s2": tok(b), "labels": torch.tensor([1, 0] * (batch // 2))}
    elif name == "clusterns":
        batch_data = {"index": torch.arange(batch), "original": tok(a)}
    else:
        batch_data = {"index": torch.arange(batch), "view1": tok(b), "view2": tok(a[::-1])}
        if name == "sccl" and views == 3:
            batch_data["original"] = tok(a)
        elif name == "sccl":
            batch_data = {"index": torch.arange(batch), "view1": tok(a), "view2": tok(b)}
    module.log = lambda *args, **kwargs: None
    module.to(device).train()
    on_device = lambda v: v.to(device) if isinstance(v, torch.Tensor) else v  # noqa: E731
    batch_data = {k: ({kk: on_device(vv) for kk, vv in v.items()} if hasattr(v, "items") else on_device(v))
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
        if args.end_to_end:
            rows += end_to_end(args, device, Path(tmp))
        if args.compile:
            rows += compiled_rows(args, device, Path(tmp))
        variants = [("authors", 0, 0)] + [("ours", c, 0) for c in args.chunk_tokens] + \
                   [("ours", args.chunk_tokens[-1], g) for g in args.grad_cache if g]
        methods = [] if args.end_to_end == "only" or args.compile_only else args.methods
        for method, arch, folder, batch, kind, precision in method_precisions(args, methods, device, Path(tmp)):
            for layout, chunk, grad_cache in variants:
                torch.manual_seed(0)
                module, data, tokens = build(method, folder, batch, kind, device, layout, chunk, grad_cache)
                params = matmul_parameters(module.encoder.backbone)
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


COMPILE_METHODS = ("sccl", "aecl")  # short-text methods: distinct batches of StackOverflow's two columns


def distinct_batches(module, kind: str, batch: int, count: int, bucket: int, device: torch.device) -> list[dict]:
    """``count`` different training batches (two views: the texts and their augmentation), each padded to its
    longest text, or up to a multiple of ``bucket`` tokens (``pad_to_multiple_of``; padding is masked, so the
    embeddings are those of the plain batch: tests/scripts/test_bench_gpu.py)."""
    from textcore.encoding.token_batches import with_token_counts

    a, b = texts(kind, batch * count)
    out = []
    for i in range(count):
        rows = slice(i * batch, (i + 1) * batch)

        def tok(xs):
            tokens = module.encoder.tokenizer(list(xs), padding="longest", truncation=True,
                                              max_length=module.encoder.max_length, return_tensors="pt",
                                              pad_to_multiple_of=bucket or None)
            return {k: (v.to(device) if isinstance(v, torch.Tensor) else v)
                    for k, v in with_token_counts(tokens).items()}

        out.append({"index": torch.arange(batch, device=device), "view1": tok(a[rows]), "view2": tok(b[rows])})
    return out


def measure_cycle(module, batches: list[dict], precision: str, device: torch.device, steps: int,
                  warmup: int) -> dict:
    """Steps over ``batches`` in turn: the first pass (every shape's first step: compilation) timed apart, then
    ``warmup`` passes, then ``steps`` timed steps; steady = the median step."""
    optimizer = module.configure_optimizers()
    optimizer = optimizer["optimizer"] if isinstance(optimizer, dict) else optimizer
    scaler = torch.amp.GradScaler(device.type, enabled=precision == "fp16")

    def step(i: int) -> float:
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        start = time.perf_counter()
        optimizer.zero_grad(set_to_none=True)
        with precision_context(precision, device):
            loss = module.training_step(batches[i % len(batches)], i)
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        return time.perf_counter() - start

    first = sum(step(i) for i in range(len(batches)))
    for i in range(warmup * len(batches)):
        step(len(batches) + i)
    times = sorted(step(i) for i in range(steps))
    steady = times[len(times) // 2]
    return {"first_pass_s": first, "steady_s": steady, "compile_s": max(0.0, first - len(batches) * steady)}


def compiled_rows(args, device: torch.device, tmp: Path) -> list[dict]:
    """Eager and compiled steps (``--compile`` modes) over ``--distinct-batches`` batches, with and without
    bucketed lengths (``--bucket``), one padded encoder call a step."""
    rows = []
    methods = [m for m in args.compile_methods if m in COMPILE_METHODS]
    for method, arch, folder, batch, kind, precision in method_precisions(args, methods, device, tmp):
        for bucket in args.bucket:
            eager_s = None
            for mode in ["eager", *(args.compile if bucket in args.compile_bucket else [])]:
                if mode == "reduce-overhead" and device.type != "cuda":
                    print("bench_gpu: compile mode reduce-overhead (CUDA graphs) skipped: no CUDA device",
                          file=sys.stderr, flush=True)
                    continue
                torch.manual_seed(0)
                torch._dynamo.reset()  # each variant compiles afresh: its compile time is its own
                module, _, _ = build(method, folder, batch, kind, device, "ours", 0, 0, views=2)
                data = distinct_batches(module, kind, batch, args.distinct_batches, bucket, device)
                if mode != "eager":
                    module.encoder.backbone.compile(dynamic=args.compile_dynamic, backend=args.compile_backend,
                                                    mode=None if mode == "default" else mode)
                result = measure_cycle(module, data, precision, device, args.steps, args.warmup)
                widths = sorted({int(b[v]["input_ids"].shape[1]) for b in data for v in ("view1", "view2")})
                eager_s = result["steady_s"] if mode == "eager" else eager_s
                saved = eager_s - result["steady_s"] if eager_s else 0.0
                row = {"method": method, "arch": arch, "batch": batch, "precision": precision,
                       "layout": "compiled", "mode": mode, "bucket": bucket, "widths": widths,
                       "steps_per_s": 1 / result["steady_s"], "compile_s": result["compile_s"] if mode != "eager"
                       else None, "vs_eager": eager_s / result["steady_s"] if eager_s else None,
                       "break_even_steps": (result["compile_s"] / saved) if mode != "eager" and saved > 0
                       else None, "chunk_tokens": 0, "grad_cache_tokens": 0, "peak_gib": None, "loss": None,
                       "mfu": None}
                rows.append(row)
                print(f"bench_gpu: {row}", file=sys.stderr, flush=True)
                del module, data
                if device.type == "cuda":
                    torch.cuda.empty_cache()
    return rows


def render_compiled(rows: list[dict], paper_steps: int = 3000) -> list[str]:
    if not rows:
        return []
    lines = ["", "Compiled step in steady state (`torch.compile` of the backbone; one padded call a step over "
             f"distinct batches; compile s = the first pass over them less its steady time; break-even: steps "
             f"until compiling has paid for itself; {paper_steps} steps: a paper run's training time, compile "
             "included):", "",
             "| method | backbone, batch | precision | bucket | widths | mode | steady steps/s | vs eager | compile s "
             f"| break-even steps | {paper_steps} steps, min |", "|---" * 11 + "|"]
    for row in rows:
        compile_s = row["compile_s"] or 0.0
        total = (paper_steps / row["steps_per_s"] + compile_s) / 60
        lines.append(f"| {row['method']} | {row['arch']}, {row['batch']} | {row['precision']} | "
                     f"{row['bucket'] or '-'} | {len(row['widths'])} ({row['widths'][0]}-{row['widths'][-1]}) | "
                     f"{row['mode']} | {row['steps_per_s']:.2f} | "
                     + ("-" if row["vs_eager"] is None else f"{row['vs_eager']:.2f}x") + " | "
                     + ("-" if row["compile_s"] is None else f"{row['compile_s']:.1f}") + " | "
                     + ("-" if row["break_even_steps"] is None else f"{row['break_even_steps']:.0f}")
                     + f" | {total:.1f} |")
    return lines


E2E_METHODS = ("sccl", "aecl")  # short-text methods: the end-to-end row trains on StackOverflow itself
TRAINER = {"fp32": ("gpu_fp32", "32-true"), "tf32": ("gpu_fp32", "32-true"), "bf16": ("gpu", "bf16-mixed"),
           "fp16": ("gpu", "16-mixed")}


def run_overrides(method: str, folder: Path, batch: int, precision: str, device: torch.device, chunk: int,
                  steps: int, data_dir: Path, out: Path) -> list[str]:
    """``run.py`` arguments of one end-to-end run: the real DataModule, evaluation and reports off."""
    group, trainer_precision = TRAINER[precision]
    return [
        f"method={method}", "dataset=stackoverflow", f"data_dir={data_dir}", f"backbone.name={folder}",
        f"batch_size={batch}", f"trainer={group if device.type == 'cuda' else 'cpu'}",
        f"++trainer.precision={trainer_precision}", f"trainer.max_steps={steps}", "trainer.max_epochs=-1",
        "float32_matmul_precision=" + ("high" if precision == "tf32" else "highest"),
        f"encoder_chunk_tokens={chunk}", "~dataset.callbacks.clustering_eval", "~callbacks.report",
        "~callbacks.progress", "~callbacks.progress_lines", "~callbacks.model_summary", "print_table=false",
        "callbacks.checkpoint.every_n_steps=0", "callbacks.checkpoint.every_n_minutes=0",
        "callbacks.checkpoint.save_final=false", "trainer.log_every_n_steps=50", "trainer.enable_progress_bar=false",
        "trainer.enable_model_summary=false", f"paths.output_dir={out}",
        *(["method.callbacks.centroid_init.n_init=1"] if method == "sccl" else
          ["method.callbacks.stage_switch.kmeans_n_init=1", "method.e1=1000"]),
    ]


def run_config(overrides: list[str]):
    """``run.py``'s config with these overrides (composed by Hydra)."""
    from hydra import compose, initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra

    GlobalHydra.instance().clear()
    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base="1.3"):
        return compose(config_name="config", overrides=overrides)


@contextlib.contextmanager
def first_callbacks(*callbacks):
    """Within: ``run.train`` puts these callbacks before the config's."""
    import run as run_py

    build_callbacks = run_py.instantiate_callbacks
    run_py.instantiate_callbacks = lambda c: [*callbacks] + build_callbacks(c)
    try:
        yield
    finally:
        run_py.instantiate_callbacks = build_callbacks


def timed_run(overrides: list[str], device: torch.device) -> tuple[float, float]:
    """Seconds of one ``run.train``: its training loop, from the first step's start to the end of training, and
    its start-up, from the call to the first step (data, model, e.g. the KMeans before the first step)."""
    from lightning.pytorch.callbacks import Callback

    import run as run_py

    marks = {}

    class LoopTimer(Callback):
        def on_train_batch_start(self, trainer, pl_module, batch, batch_idx):
            if "first" not in marks:
                marks["first"] = time.perf_counter()

        def on_train_end(self, trainer, pl_module):
            if device.type == "cuda":
                torch.cuda.synchronize(device)
            marks["end"] = time.perf_counter()

    cfg = run_config(overrides)
    with first_callbacks(LoopTimer()):
        marks["start"] = time.perf_counter()
        run_py.train(cfg)
    return marks["end"] - marks["first"], marks["first"] - marks["start"]


def end_to_end(args, device: torch.device, tmp: Path) -> list[dict]:
    """``Trainer.fit`` rows: steps/s from the difference of two run lengths (``--e2e-steps``), beside the raw
    step of the same layout (SCCL/AECL on StackOverflow: two encoder views, the first is the original); the
    loop's overhead is the difference of their times per step."""
    short, long = args.e2e_steps
    data_dir = data_file("short").parent.resolve()
    variants = [()] + [tuple(v.split()) for v in args.e2e_variants]  # the defaults first, then each variant
    rows = []
    methods = [m for m in args.e2e_methods if m in E2E_METHODS]
    for method, arch, folder, batch, kind, precision in method_precisions(args, methods, device, tmp):
        chunk = args.chunk_tokens[-1] if args.e2e_chunk is None else args.e2e_chunk
        torch.manual_seed(0)
        module, data, tokens = build(method, folder, batch, kind, device, "ours", chunk, 0, views=2)
        params = matmul_parameters(module.encoder.backbone)
        raw = measure(module, data, precision, device, args.steps, args.warmup)
        del module, data
        # the variants' runs alternate, repeat by repeat, so that a drift of the machine hits them alike
        seconds = {variant: [] for variant in variants}
        start_ups = {variant: [] for variant in variants}
        for repeat in range(args.e2e_repeats):
            for index, variant in enumerate(variants):
                pair = []
                for steps in (short, long):
                    out = tmp / f"e2e_{method}_{precision}_{index}_{steps}_{repeat}"
                    overrides = run_overrides(method, folder, batch, precision, device, chunk, steps, data_dir,
                                              out) + list(variant)
                    loop, start_up = timed_run(overrides, device)
                    pair.append(loop)
                    start_ups[variant].append(start_up)
                seconds[variant].append((pair[1] - pair[0]) / (long - short))
        peak = card_peak(device, precision)
        for variant in variants:
            per_step = sorted(seconds[variant])[len(seconds[variant]) // 2]
            flops = 6 * params * tokens / per_step
            row = {"method": method, "arch": arch, "batch": batch, "precision": precision,
                   "layout": "end-to-end", "views": 2, "chunk_tokens": chunk, "grad_cache_tokens": 0,
                   "steps_per_s": 1 / per_step, "tokens_per_s": tokens / per_step, "peak_gib": None,
                   "loss": raw["loss"], "mfu": flops / (peak * 1e12) if peak else None,
                   "raw_steps_per_s": 1 / raw["seconds"], "overhead_ms": 1000 * (per_step - raw["seconds"]),
                   "start_up_s": sorted(start_ups[variant])[len(start_ups[variant]) // 2],
                   "settings": " ".join(variant)}
            rows.append(row)
            print(f"bench_gpu: {row}", file=sys.stderr, flush=True)
    return rows


def host_syncs(overrides: list[str], device: torch.device, steps: int) -> tuple[list[int], collections.Counter]:
    """The host syncs CUDA reports (``torch.cuda.set_sync_debug_mode("warn")``) in one ``run.train`` of ``steps``
    steps, by source line, summed over its quiet steps: neither the first two nor the last, none of them a logging
    step (the run logs after its last step only); (those steps, the counts)."""
    import warnings

    from lightning.pytorch.callbacks import Callback

    import run as run_py

    state = {"step": None}
    seen = collections.defaultdict(collections.Counter)

    class Steps(Callback):
        def on_train_batch_start(self, trainer, pl_module, batch, batch_idx):
            state["step"] = trainer.global_step

        def on_train_epoch_end(self, trainer, pl_module):
            state["step"] = None  # what runs once an epoch (AECL's pseudo-labels) is no step's

        def on_train_end(self, trainer, pl_module):
            state["step"] = None

    def record(message, category, filename, lineno, file=None, line=None):
        if state["step"] is not None and "synchroniz" in str(message):
            seen[state["step"]][f"{Path(filename).name}:{lineno}"] += 1

    overrides = [o for o in overrides if not o.startswith("trainer.log_every_n_steps")]
    cfg = run_config(overrides + [f"trainer.log_every_n_steps={steps + 10}"])
    shown = warnings.showwarning
    try:
        with first_callbacks(Steps()), warnings.catch_warnings():
            warnings.simplefilter("always")
            warnings.showwarning = record
            torch.cuda.set_sync_debug_mode("warn")
            run_py.train(cfg)
    finally:
        torch.cuda.set_sync_debug_mode("default")
        warnings.showwarning = shown
    quiet = list(range(2, steps - 1))
    total = collections.Counter()
    for step in quiet:
        total.update(seen.get(step, {}))
    return quiet, total


def count_syncs(args, device: torch.device, tmp: Path, steps: int = 12) -> dict:
    """Host syncs CUDA reports in ``steps`` SCCL steps of ``Trainer.fit`` in bf16 (``host_syncs``), none of them
    a logging step after the first two; per step and by source line."""
    if device.type != "cuda":
        print("count-syncs: no CUDA device, nothing to count")
        return {}
    _, folder, batch, _ = method_backbone("sccl", args.tiny, tmp)
    overrides = run_overrides("sccl", folder, batch, "bf16", device, 0, steps, data_file("short").parent.resolve(),
                              tmp / "syncs")
    quiet, total = host_syncs(overrides, device, steps)
    per_step = sum(total.values()) / max(1, len(quiet))
    print(f"count-syncs: {per_step:.1f} syncs a step in steps {quiet[0]}-{quiet[-1]} (no logging step); "
          f"sources: {dict(total.most_common(8))}")
    return {"per_step": per_step, "sources": dict(total)}


def matmul_parameters(backbone) -> int:
    """Parameters that take part in matrix products: the backbone's without its embedding tables (a lookup
    costs no multiply-adds), for model-FLOPs utilisation."""
    embeddings = {id(p) for m in backbone.modules() if isinstance(m, torch.nn.Embedding) for p in m.parameters()}
    return sum(p.numel() for p in backbone.parameters() if id(p) not in embeddings)


def render_end_to_end(rows: list[dict]) -> list[str]:
    if not rows:
        return []
    lines = ["", "End to end (`Trainer.fit` on the real DataModule, evaluation off; steps/s from the difference of "
             "two run lengths, each timed from its first step to the end of training) beside the raw step of the "
             "same layout (2 views, one batch reused); start-up: from `run.train` to the first step (data, model, "
             "KMeans of the centroids), the median of the runs:", "",
             "| method | backbone, batch | precision | chunk tokens | settings | end-to-end steps/s | raw steps/s | "
             "end-to-end / raw | loop overhead ms/step | MFU | start-up s |", "|---" * 11 + "|"]
    for row in rows:
        mfu = "-" if row["mfu"] is None else f"{100 * row['mfu']:.0f} %"
        settings = f"`{row['settings']}`" if row.get("settings") else "defaults"
        lines.append(f"| {row['method']} | {row['arch']}, {row['batch']} | {row['precision']} | "
                     f"{row['chunk_tokens'] or '-'} | {settings} | {row['steps_per_s']:.2f} | "
                     f"{row['raw_steps_per_s']:.2f} | "
                     f"{row['steps_per_s'] / row['raw_steps_per_s']:.2f} | {row['overhead_ms']:.1f} | {mfu} | "
                     f"{row['start_up_s']:.1f} |")
    return lines


def render(rows: list[dict], args) -> str:
    device = torch.device(args.device)
    card = torch.cuda.get_device_name(device) if device.type == "cuda" else "CPU"
    versions = f"torch {torch.__version__}" + (f", CUDA {torch.version.cuda}" if device.type == "cuda" else "")
    lines = [START, f"## GPU: paper-scale training steps ({card})", "",
             f"_Measured {dt.date.today().isoformat()}; {versions}; `python scripts/bench/gpu.py "
             + " ".join(sys.argv[1:]) + "`. Random-init backbones of the papers' architectures, max length 32._", "",
             "| method | backbone, batch | precision | layout | chunk tokens | cached | steps/s | tokens/s | "
             "peak GiB | MFU | vs authors | vs plain |", "|---" * 12 + "|"]
    raw = [r for r in rows if r["layout"] in ("authors", "ours")]
    for row in raw:
        base = next(r for r in raw if r["method"] == row["method"] and r["precision"] == row["precision"]
                    and r["layout"] == "authors")
        peak = "-" if row["peak_gib"] is None else f"{row['peak_gib']:.1f}"
        mfu = "-" if row["mfu"] is None else f"{100 * row['mfu']:.0f} %"
        # cached gradients against the same step without them (worth it at >= 0.6x where the batch fits)
        plain = next((r for r in raw if row["grad_cache_tokens"] and r["method"] == row["method"]
                      and r["precision"] == row["precision"] and r["layout"] == "ours"
                      and r["chunk_tokens"] == row["chunk_tokens"] and not r["grad_cache_tokens"]), None)
        versus = f"{row['steps_per_s'] / plain['steps_per_s']:.2f}x" if plain else "-"
        lines.append(f"| {row['method']} | {row['arch']}, {row['batch']} | {row['precision']} | {row['layout']} | "
                     f"{row['chunk_tokens'] or '-'} | {row['grad_cache_tokens'] or '-'} | {row['steps_per_s']:.2f} | "
                     f"{row['tokens_per_s']:.0f} | {peak} | {mfu} | "
                     f"{row['steps_per_s'] / base['steps_per_s']:.2f}x | {versus} |")
    if not raw:
        lines = lines[:-2]
    lines += render_end_to_end([r for r in rows if r["layout"] == "end-to-end"])
    lines += render_compiled([r for r in rows if r["layout"] == "compiled"])
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
    global DATA_DIR
    DATA_DIR = args.data_dir
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
    print(section)
    return rows


if __name__ == "__main__":
    main()
