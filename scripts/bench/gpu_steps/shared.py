"""What the GPU benchmarks of ``scripts/bench/gpu.py`` share: the papers' backbones (random-init, saved once), their
batches and texts, a module and batch built for one row, a timed training step under a precision, the card's peak,
and ``run.py`` composed and started in-process.

Backbones are randomly initialised from the papers' architectures (no download; a random model costs what
the trained one costs): DistilBERT-base for SCCL and AECL at batch 400, BERT-base for ClusterNS at 256 and
PairSupCon at 1024, BERT-large for ClusterNS at 128 per GPU (the authors' 4 x 128). Texts are real
(StackOverflow's short texts, the Wikipedia sample for ClusterNS), max length 32, the offline MiniLM tokenizer
(the BERT uncased vocabulary). Precisions: ``fp32`` (float32, true float32 matrix products), ``tf32`` (float32
with TF32 products), ``bf16`` / ``fp16`` (autocast mixed precision, fp16 with a gradient scaler, float32
weights).
"""
from __future__ import annotations

import contextlib
import csv
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("PROJECT_ROOT", str(ROOT))
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import torch  # noqa: E402

from datamodules.download.catalogue import data_root  # noqa: E402

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
# run.py's trainer group and precision for each of PRECISIONS
TRAINER = {"fp32": ("gpu_fp32", "32-true"), "tf32": ("gpu_fp32", "32-true"), "bf16": ("gpu", "bf16-mixed"),
           "fp16": ("gpu", "16-mixed")}


def card_peak(device: torch.device, precision: str) -> float | None:
    if device.type != "cuda":
        return None
    name = torch.cuda.get_device_name(device)
    return next((p[precision] for key, p in PEAK_TFLOPS.items() if key in name), None)


def matmul_parameters(backbone) -> int:
    """Parameters that take part in matrix products: the backbone's without its embedding tables (a lookup
    costs no multiply-adds), for model-FLOPs utilisation."""
    embeddings = {id(p) for m in backbone.modules() if isinstance(m, torch.nn.Embedding) for p in m.parameters()}
    return sum(p.numel() for p in backbone.parameters() if id(p) not in embeddings)


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
# .gpu/data: --data-dir, set by the command)
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


class TimedSteps:
    """A module's training steps as a run takes them (its optimizer; fp16 with a gradient scaler), each timed from
    a synchronised device to a synchronised device."""

    def __init__(self, module, precision: str, device: torch.device):
        optimizer = module.configure_optimizers()
        self.optimizer = optimizer["optimizer"] if isinstance(optimizer, dict) else optimizer
        self.scaler = torch.amp.GradScaler(device.type, enabled=precision == "fp16")
        self.module, self.precision, self.device = module, precision, device

    def _synchronize(self) -> None:
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)

    def step(self, batch, index: int) -> tuple[float, torch.Tensor]:
        """(seconds, loss) of one step on ``batch``."""
        self._synchronize()
        start = time.perf_counter()
        self.optimizer.zero_grad(set_to_none=True)
        with precision_context(self.precision, self.device):
            loss = self.module.training_step(batch, index)
        self.scaler.scale(loss).backward()
        self.scaler.step(self.optimizer)
        self.scaler.update()
        self._synchronize()
        return time.perf_counter() - start, loss


def release(device: torch.device) -> None:
    """The cached memory of a finished row back to the device, so the next row's peak is its own."""
    if device.type == "cuda":
        torch.cuda.empty_cache()


def show(row: dict) -> None:
    print(f"bench_gpu: {row}", file=sys.stderr, flush=True)


# -- run.py in this process -----------------------------------------------------------------------------------
def run_overrides(method: str, folder: Path, batch: int, precision: str, device: torch.device, chunk: int,
                  steps: int, data_dir: Path, out: Path) -> list[str]:
    """``run.py`` arguments of one run of SCCL or AECL on StackOverflow: the real DataModule, evaluation and
    reports off."""
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
    from ctclust.training import train as training

    build_callbacks = training.instantiate_callbacks
    training.instantiate_callbacks = lambda c: [*callbacks] + build_callbacks(c)
    try:
        yield
    finally:
        training.instantiate_callbacks = build_callbacks
