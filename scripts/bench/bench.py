"""Speed, memory and evaluation benchmark; writes BENCHMARKS.md (and the raw numbers to BENCHMARKS.json).

Parts (``--only a,b``; default: all, in this order; each part's numbers replace that part's in
BENCHMARKS.json, and BENCHMARKS.md is rendered from every part recorded there):

- ``train``: training steps/s at equal work, variants interleaved in rounds on the same batches.
  SCCL with three encoder passes of 64 StackOverflow texts (original, augmentation, and the
  original again as the second view): the AUTHORS' step re-implemented here exactly as their code
  computes it (three backbone calls on texts padded to max_length 32, mean pooling, PairConLoss
  and KLDivLoss on log(q + 1e-8)) against ours with chunking off (three calls padded to each
  view's longest text) and on (length-sorted chunks, per view and all views in one call).
  AECL stage-1 and stage-3 steps the same way (padded to 32 / ours unchunked / ours chunked).
  Then the equality check: loss and gradients of the authors' step, ours unchunked and ours
  chunked on the same batches with dropout off.
- ``eval``: the 10-seed clustering protocol on the benchmarks in ``--data-dir``: each set embedded
  once (timed), then KMeans with seeds 0-9 for each backend (scikit-learn float64, the
  older protocol, scikit-learn float32, fast and faiss float32; 10 restarts each): seconds, ACC and NMI side by side.
- ``e2e``: wall time of ``python tools.py evaluate --model minilm --tasks clustering``
  (the default backend), the command a user runs.
- ``inrun``: one periodic in-run evaluation of SCCL on StackOverflow (what ``ClusteringEvaluator``
  does every N steps): encoder pass over the 20,000 texts, KMeans, metrics; old (sklearn float64)
  against the default.
- ``memory``: peak resident memory of ``python run.py method=sccl dataset=stackoverflow`` at
  batch 64 with chunking on (default) and off.
- ``scale``: a run on generated corpora of 10k, 100k and 1M texts (tiny backbone) and of 100k with MiniLM: wall
  time per phase, peak memory, the growth exponent; ``tools.py predict`` on 10k and 1M new texts
  (scripts/bench/scale.py).
- ``corpus``: ``tools.py predict`` of 1M texts on 1 and 2 CPU processes and of 10M on 2 (tiny backbone): texts/s,
  peak memory per process, output size; on 1 and every GPU where there is one (scripts/bench/corpus.py).

Usage: python scripts/bench/bench.py [--only train,eval,e2e,inrun,memory,scale,corpus] [--data-dir data/short_text]
       [--steps 30] [--rounds 6] [--out BENCHMARKS.md]
Timings are only meaningful on an otherwise idle machine; the load average is recorded with each part.
"""
from __future__ import annotations

import argparse
import copy
import datetime as dt
import json
import os
import random
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("PROJECT_ROOT", str(ROOT))
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import numpy as np  # noqa: E402
import torch  # noqa: E402

from datamodules.download.catalogue import data_root  # noqa: E402
from scripts.bench.corpus import part_corpus  # noqa: E402
from scripts.bench.reference_step import AuthorsSCCLStep  # noqa: E402
from scripts.bench.report import EVAL_VARIANTS, PARTS, document, machine, render  # noqa: E402
from scripts.bench.scale import fresh_run_folder, part_scale  # noqa: E402
from textcore.device_settings import Device, device_defaults  # noqa: E402
from textcore.encoding.chunking import CHUNK_IF_BELOW  # noqa: E402
from textcore.encoding.token_batches import length_chunks  # noqa: E402

BATCH = 64
MAX_LENGTH = 32
CPU_RUN = device_defaults(Device("cpu"))  # the speed settings of a run on the CPU, what this benchmark measures
CHUNK = CPU_RUN["encoder_chunk_tokens"]


# ----------------------------------------------------------------------------- data
def stackoverflow(data_dir: str):
    from datamodules.short_text_corpus import load_corpus

    return load_corpus(Path(data_dir) / "stackoverflow.csv", "text0", "label", aug_columns=["text1"])


def draw_batches(corpus, n: int, seed: int = 0) -> list[dict]:
    """``n`` random batches of 64 rows: original text, augmentation, and the original again.

    The third list is the second view of SCCL's three passes (the authors' explicit mode takes
    two augmentation columns; StackOverflow has one). Every variant sees these same texts.
    """
    rng = random.Random(seed)
    texts, augs = corpus.texts, corpus.augmentations[0]
    batches = []
    for _ in range(n):
        rows = rng.sample(range(len(texts)), BATCH)
        batches.append({
            "index": torch.tensor(rows),
            "original": [texts[i] for i in rows],
            "view1": [augs[i] for i in rows],
            "view2": [texts[i] for i in rows],
        })
    return batches


def tokenize(tokenizer, texts: list[str], pad_to_max: bool) -> dict[str, torch.Tensor]:
    return dict(tokenizer(texts, padding="max_length" if pad_to_max else "longest", truncation=True,
                          max_length=MAX_LENGTH, return_tensors="pt"))


def ours_batch(tokenizer, raw: dict, views: tuple[str, ...], pad_to_max: bool = False) -> dict:
    """Our collated batch: every view tokenised and padded to its own longest text (as TextCollator)."""
    return {"index": raw["index"], **{v: tokenize(tokenizer, raw[v], pad_to_max) for v in views}}


# ----------------------------------------------------------------------------- models
BACKBONE = "minilm"  # --backbone tiny: a quick check that the script runs (numbers meaningless)


def sccl_model():
    from lightning_modules.sccl.module import SCCL

    torch.manual_seed(0)
    model = SCCL(num_clusters=20, backbone=BACKBONE, chunk_tokens=CHUNK, instance_weight=1.0, cluster_weight=1.0)
    model.log = lambda *args, **kwargs: None  # no Trainer here
    return model


def aecl_model():
    from lightning_modules.aecl.module import AECL

    torch.manual_seed(0)
    model = AECL(num_clusters=20, backbone=BACKBONE, chunk_tokens=CHUNK)
    model.log = lambda *args, **kwargs: None
    return model


def set_sccl_centroids(model, corpus) -> None:
    """Centroids = embeddings of 20 texts: a realistic soft assignment for the cluster loss."""
    rows = random.Random(1).sample(range(len(corpus.texts)), 20)
    model.set_centroids(model.encoder.encode([corpus.texts[i] for i in rows]))


def encoder_tokens(lengths_per_view: list[list[int]], chunk: int, concat: bool) -> int:
    """Token positions the backbone processes (rows x padded width, summed over calls)."""
    if not chunk:
        return sum(len(v) * max(v) for v in lengths_per_view)
    groups = [sum(lengths_per_view, [])] if concat else lengths_per_view
    total = 0
    for g in groups:
        planned = sum(len(rows) * max(g[i] for i in rows) for rows in length_chunks(g, chunk))
        total += planned if planned <= CHUNK_IF_BELOW * len(g) * max(g) else len(g) * max(g)  # as TextEncoder
    return total


# ----------------------------------------------------------------------------- part: train
def timed_rounds(variants: dict, batches: list, rounds: int, warmup: int = 2) -> dict[str, float]:
    """Steps/s of each variant: ``variants[name](raw_batch)`` runs one full step (tokenise, forward,
    backward, optimiser). Each round times ``len(batches) // rounds`` steps of every variant in
    turn, on the same batches, so drift of the machine's speed hits all alike."""
    for run in variants.values():
        for raw in batches[:warmup]:
            run(raw)
    per_round = max(1, len(batches) // rounds)
    elapsed = dict.fromkeys(variants, 0.0)
    for r in range(rounds):
        chunk = batches[r * per_round:(r + 1) * per_round]
        for name, run in variants.items():
            start = time.perf_counter()
            for raw in chunk:
                run(raw)
            elapsed[name] += time.perf_counter() - start
    return {name: per_round * rounds / seconds for name, seconds in elapsed.items()}


def _step(optimizer, loss) -> None:
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()


def sccl_variants(model, authors: AuthorsSCCLStep, optimizer) -> dict:
    tok = model.encoder.tokenizer
    views = ("view1", "view2", "original")

    def ours(chunk: int, concat: bool):
        def run(raw):
            model.encoder.chunk_tokens, model.encoder.concat_views = chunk, concat
            _step(optimizer, model.training_step(ours_batch(tok, raw, views), 0))
        return run

    def theirs(raw):
        _step(optimizer, authors.loss(*authors.prepare(tok, raw)))

    return {
        "authors (3 calls, padded to 32)": theirs,
        "ours, chunking off (3 calls, padded to longest)": ours(0, False),
        f"ours, chunks of {CHUNK} tokens, 3 calls": ours(CHUNK, False),
        f"ours, chunks of {CHUNK // 2} tokens, 1 call": ours(CHUNK // 2, True),
        f"ours, chunks of {CHUNK} tokens, 1 call (default)": ours(CHUNK, True),
    }


def aecl_variants(model, optimizer) -> dict:
    tok = model.encoder.tokenizer

    def ours(chunk: int, concat: bool, pad_to_max: bool = False):
        def run(raw):
            model.encoder.chunk_tokens, model.encoder.concat_views = chunk, concat
            batch = ours_batch(tok, raw, ("original", "view2"), pad_to_max)
            _step(optimizer, model.training_step(batch, 0))
        return run

    return {
        "2 calls, padded to 32 (as the reference code tokenises)": ours(0, False, pad_to_max=True),
        "ours, chunking off (2 calls, padded to longest)": ours(0, False),
        f"ours, chunks of {CHUNK} tokens, 1 call (default)": ours(CHUNK, True),
    }


def gradients(module) -> dict[str, torch.Tensor]:
    return {n: p.grad.detach().clone() for n, p in module.named_parameters() if p.grad is not None}


def compare_grads(a: dict, b: dict) -> float:
    """Largest |difference| of a gradient entry relative to the largest |entry| of its tensor.

    Tensors whose gradient is zero in exact arithmetic (the attention key biases: the softmax
    ignores a constant added to every key) hold only rounding noise (~1e-13); they are measured
    against 1e-3 of the model's largest gradient instead of their own.
    """
    floor = 1e-3 * max(float(g.abs().max()) for g in a.values())
    return max(float((b[name] - grad).abs().max()) / max(float(grad.abs().max()), floor) for name, grad in a.items())


def equality_check(model, authors: AuthorsSCCLStep, batches: list) -> dict:
    """Dropout off: loss and gradients of the authors' step, ours unchunked and ours chunked."""
    tok = model.encoder.tokenizer
    model.eval()
    rows = []
    try:
        for raw in batches:
            model.zero_grad()
            theirs = authors.loss(*authors.prepare(tok, raw))
            theirs.backward()
            g_theirs = gradients(model)
            results = {}
            for name, (chunk, concat) in {"unchunked": (0, False), "chunked": (CHUNK, True)}.items():
                model.encoder.chunk_tokens, model.encoder.concat_views = chunk, concat
                model.zero_grad()
                loss = model.training_step(ours_batch(tok, raw, ("view1", "view2", "original")), 0)
                loss.backward()
                results[name] = (float(loss.detach()), gradients(model))
            rows.append({
                "authors_loss": float(theirs.detach()),
                "unchunked_loss": results["unchunked"][0],
                "chunked_loss": results["chunked"][0],
                "loss_diff_unchunked_vs_authors": abs(results["unchunked"][0] - float(theirs.detach())),
                "loss_diff_chunked_vs_unchunked": abs(results["chunked"][0] - results["unchunked"][0]),
                "grad_rel_diff_unchunked_vs_authors": compare_grads(g_theirs, results["unchunked"][1]),
                "grad_rel_diff_chunked_vs_unchunked": compare_grads(results["unchunked"][1], results["chunked"][1]),
                "parameters_compared": len(g_theirs),
            })
    finally:
        model.train()
        model.zero_grad()
    return {key: max(r[key] for r in rows) if "diff" in key else rows[0][key] for key in rows[0]} | {
        "batches": len(rows)}


def aecl_equality(model, batches: list, stage: int) -> dict:
    tok = model.encoder.tokenizer
    model.eval()
    model.set_stage(stage)
    worst_loss, worst_grad = 0.0, 0.0
    try:
        for raw in batches:
            out = {}
            for name, (chunk, concat) in {"unchunked": (0, False), "chunked": (CHUNK, True)}.items():
                model.encoder.chunk_tokens, model.encoder.concat_views = chunk, concat
                model.zero_grad()
                loss = model.training_step(ours_batch(tok, raw, ("original", "view2")), 0)
                loss.backward()
                out[name] = (float(loss.detach()), gradients(model))
            worst_loss = max(worst_loss, abs(out["chunked"][0] - out["unchunked"][0]))
            worst_grad = max(worst_grad, compare_grads(out["unchunked"][1], out["chunked"][1]))
    finally:
        model.train()
        model.zero_grad()
    return {"loss_diff_chunked_vs_unchunked": worst_loss, "grad_rel_diff_chunked_vs_unchunked": worst_grad}


def part_train(args) -> dict:
    corpus = stackoverflow(args.data_dir)
    batches = draw_batches(corpus, args.steps + 2)
    out: dict = {"steps": args.steps, "rounds": args.rounds, "batch": BATCH, "views": 3, "backbone": BACKBONE}

    model = sccl_model()
    tok = model.encoder.tokenizer
    set_sccl_centroids(model, corpus)
    authors = AuthorsSCCLStep(model, MAX_LENGTH)
    twin = copy.deepcopy(model)  # the check's backward passes leave the timed model untouched
    out["sccl_equality"] = equality_check(twin, AuthorsSCCLStep(twin, MAX_LENGTH), batches[:3])
    del twin
    optimizer = model.configure_optimizers()
    model.train()
    out["sccl_steps_per_s"] = timed_rounds(sccl_variants(model, authors, optimizer), batches, args.rounds)

    lengths = [[len(tok(t, truncation=True, max_length=MAX_LENGTH)["input_ids"]) for t in raw[v]]
               for raw in batches for v in ("view1", "view2", "original")]
    per_batch = [lengths[i:i + 3] for i in range(0, len(lengths), 3)]
    out["sccl_tokens_per_step"] = {
        "authors (padded to 32)": BATCH * 3 * MAX_LENGTH,
        "chunking off": float(np.mean([encoder_tokens(b, 0, False) for b in per_batch])),
        f"chunks of {CHUNK}, 3 calls": float(np.mean([encoder_tokens(b, CHUNK, False) for b in per_batch])),
        f"chunks of {CHUNK // 2}, 1 call": float(np.mean([encoder_tokens(b, CHUNK // 2, True) for b in per_batch])),
        f"chunks of {CHUNK}, 1 call": float(np.mean([encoder_tokens(b, CHUNK, True) for b in per_batch])),
        "text tokens": float(np.mean([sum(map(sum, b)) for b in per_batch])),
    }
    del model, optimizer

    aecl = aecl_model()
    out["aecl_equality"] = {f"stage {s}": aecl_equality(copy.deepcopy(aecl), batches[:2], s) for s in (1, 3)}
    optimizer = aecl.configure_optimizers()
    aecl.train()
    aecl_steps = max(args.rounds, args.steps * 2 // 3)
    out["aecl_steps_per_s"] = {}
    for stage in (1, 3):
        aecl.set_stage(stage)
        out["aecl_steps_per_s"][f"stage {stage}"] = timed_rounds(aecl_variants(aecl, optimizer),
                                                                 batches[:aecl_steps + 2], args.rounds)
    out["aecl_steps"] = aecl_steps
    return out


# ----------------------------------------------------------------------------- part: eval


def part_eval(args) -> dict:
    from datamodules.short_text_corpus import load_corpus
    from evaluation.benchmarks.clustering_tasks import BENCHMARKS, clustering_sets
    from evaluation.clustering.metrics import clustering_scores
    from evaluation.model_io.embedding_cache import EmbeddingCache
    from evaluation.model_io.load import load_encoder
    from textcore.kmeans import kmeans_fit

    encoder, pooling = load_encoder(BACKBONE)
    encoder.max_length = MAX_LENGTH
    seeds = list(range(args.seeds))
    out: dict = {"seeds": seeds, "n_init": 10, "datasets": {}, "skipped": [], "backbone": BACKBONE}
    names = [n.strip() for n in args.sets.split(",")] if args.sets else BENCHMARKS
    for entry in clustering_sets(args.data_dir, names):
        if not entry.path.is_file():
            out["skipped"].append(entry.name)
            continue
        corpus = load_corpus(entry.path, entry.text_column, entry.label_column)
        k = entry.num_clusters or len(np.unique(corpus.labels))
        start = time.perf_counter()
        embeddings = EmbeddingCache(encoder).encode(corpus.texts, pooling)  # [n, d] float32
        row = {"n": len(corpus.texts), "k": int(k), "embed_seconds": time.perf_counter() - start, "backends": {}}
        for backend, dtype in EVAL_VARIANTS:
            fit_s = score_s = 0.0
            runs = []
            for seed in seeds:
                t0 = time.perf_counter()
                labels = kmeans_fit(embeddings, k, seed, 10, backend, dtype).labels_
                t1 = time.perf_counter()
                runs.append(clustering_scores(corpus.labels, labels))
                fit_s, score_s = fit_s + t1 - t0, score_s + time.perf_counter() - t1
            acc, nmi = np.array([r["acc"] for r in runs]), np.array([r["nmi"] for r in runs])
            row["backends"][f"{backend} {dtype}"] = {
                "acc": float(acc.mean()), "acc_std": float(acc.std()), "nmi": float(nmi.mean()),
                "nmi_std": float(nmi.std()), "kmeans_seconds": fit_s, "metric_seconds": score_s,
            }
        out["datasets"][entry.name] = row
        print(f"eval: {entry.name} done", file=sys.stderr, flush=True)
    return out


# ----------------------------------------------------------------------------- part: e2e
def part_e2e(args) -> dict:
    out_dir = ROOT / "logs" / "bench" / "e2e"
    command = [sys.executable, str(ROOT / "tools.py"), "evaluate", "--model", BACKBONE,
               "--tasks", "clustering",
               "--short-text-dir", args.data_dir, "--output", str(out_dir)]
    command += ["--datasets", args.sets] if args.sets else []
    start = time.perf_counter()
    subprocess.run(command, cwd=ROOT, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wall = time.perf_counter() - start
    result = json.loads((out_dir / f"{BACKBONE}.json").read_text())
    clustering = result["clustering"]
    return {
        "command": f"python tools.py evaluate --model {BACKBONE} --tasks clustering",
        "wall_seconds": wall,
        "kmeans": clustering.get("kmeans"),
        "embed_seconds": sum(d.get("embed_seconds", 0.0) for d in clustering["datasets"].values()),
        "avg": clustering["avg"],
        "datasets": sorted(clustering["datasets"]),
    }


# ----------------------------------------------------------------------------- part: inrun
def part_inrun(args) -> dict:
    """One periodic evaluation as ClusteringEvaluator makes it, timed in pieces, old vs default backend."""
    from callbacks.evaluation.clustering_eval import evaluate_outputs
    from datamodules.short_text import ShortTextDataModule
    from lightning_modules.shared.eval_outputs import collect_eval_outputs
    from textcore.kmeans import kmeans_fit

    dm = ShortTextDataModule(data_dir=args.data_dir, file="stackoverflow.csv", text_column="text0",
                             aug_columns=["text1"], num_clusters=20, tokenizer="minilm", batch_size=BATCH,
                             eval_batch_size=256, seed=0,
                             loader={k.split(".", 1)[1]: v for k, v in CPU_RUN.items() if k.startswith("loader.")})
    dm.setup()
    model = sccl_model()
    set_sccl_centroids(model, dm.corpus)
    model.encoder.chunk_tokens = CHUNK
    out: dict = {"n": len(dm.texts), "variants": {}}
    dm.eval_dataloader()  # token counts for the length-sorted batches are computed once per run, not per evaluation
    for name, backend, dtype in (("before (sklearn float64)", "sklearn", "float64"),
                                 (f"default ({CPU_RUN['kmeans_backend']} float32)", CPU_RUN["kmeans_backend"],
                                  "float32")):
        t0 = time.perf_counter()
        outputs = collect_eval_outputs(model, dm.eval_dataloader())
        t1 = time.perf_counter()
        kmeans = kmeans_fit(outputs["embeddings"].numpy(), dm.num_clusters, 0, 10, backend, dtype)
        t2 = time.perf_counter()
        metrics, _ = evaluate_outputs(outputs, dm.labels, dm.num_clusters, kmeans=kmeans)
        t3 = time.perf_counter()
        out["variants"][name] = {"encoder_seconds": t1 - t0, "kmeans_seconds": t2 - t1, "metric_seconds": t3 - t2,
                                 "total_seconds": t3 - t0, "kmeans_acc": metrics["kmeans_acc"],
                                 "head_acc": metrics.get("head_acc")}
    return out


# ----------------------------------------------------------------------------- part: memory
def peak_memory_of_run(data_dir: str, steps: int, chunk: int) -> dict:
    run_dir = f"logs/bench/memory_run_{chunk}"  # relative to the repository, where the run starts
    fresh_run_folder(ROOT / run_dir)
    command = [sys.executable, "run.py", "method=sccl", "dataset=stackoverflow", f"data_dir={data_dir}",
               f"backbone={BACKBONE}",
               f"batch_size={BATCH}", f"trainer.max_steps={steps}", f"encoder_chunk_tokens={chunk}",
               "logger=csv", "~callbacks.progress", f"hydra.run.dir={run_dir}", "print_table=false"]
    code = ("import resource, subprocess, sys; subprocess.run(sys.argv[1:], check=True, stdout=subprocess.DEVNULL, "
            "stderr=subprocess.DEVNULL); print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)")
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", code, *command], cwd=ROOT, check=True, capture_output=True, text=True)
    # no machine path in the report: the repository's own folders relative, others from its parent
    portable = [part.replace(str(ROOT) + os.sep, "").replace(str(ROOT.parent), "..") for part in command[1:]]
    return {"command": " ".join(portable), "peak_gib": int(done.stdout.strip()) / 1024**2,
            "wall_seconds": time.perf_counter() - start}


def part_memory(args) -> dict:
    return {"steps": args.memory_steps,
            "runs": {str(chunk): peak_memory_of_run(args.data_dir, args.memory_steps, chunk) for chunk in (CHUNK, 0)}}


RUN = {"train": part_train, "eval": part_eval, "e2e": part_e2e, "inrun": part_inrun, "memory": part_memory,
       "scale": part_scale, "corpus": part_corpus}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", default=",".join(PARTS), help=f"comma-separated parts: {','.join(PARTS)}")
    parser.add_argument("--data-dir", default=str(data_root() / "short_text"),
                        help="folder with stackoverflow.csv (default: the project's data folder, $PROJECT_DATA_DIR)")
    parser.add_argument("--steps", type=int, default=30, help="timed SCCL training steps per variant")
    parser.add_argument("--rounds", type=int, default=6, help="interleaved rounds the timed steps are split into")
    parser.add_argument("--seeds", type=int, default=10, help="KMeans seeds of the eval part")
    parser.add_argument("--sets", default=None, help="eval part: comma-separated benchmarks (default: all present)")
    parser.add_argument("--memory-steps", type=int, default=20, help="training steps of each memory run")
    parser.add_argument("--scale-sizes", default="10000,100000,1000000", help="scale part: corpus sizes, tiny backbone")
    parser.add_argument("--scale-minilm", type=int, default=100000, help="scale part: MiniLM run size (0: none)")
    parser.add_argument("--corpus-sizes", default="1000000,10000000",
                        help="corpus part: new texts to predict (the smaller on 1 and 2 processes, the larger on 2)")
    parser.add_argument("--out", default=str(ROOT / "BENCHMARKS.md"))
    parser.add_argument("--backbone", default="minilm", help=argparse.SUPPRESS)  # tiny: check the script runs
    args = parser.parse_args()
    global BACKBONE
    BACKBONE = args.backbone
    parts = [p.strip() for p in args.only.split(",") if p.strip()]
    unknown = [p for p in parts if p not in PARTS]
    if unknown:
        sys.exit(f"error: unknown part(s) {unknown}; choose from {', '.join(PARTS)}")
    if set(parts) - {"scale", "corpus"} and not (Path(args.data_dir) / "stackoverflow.csv").exists():
        sys.exit(f"error: {args.data_dir}/stackoverflow.csv not found; pass --data-dir <folder with stackoverflow.csv>")
    out_md = Path(args.out)
    out_json = out_md.with_suffix(".json")
    results = json.loads(out_json.read_text()) if out_json.is_file() else {}
    results["machine"] = machine()
    for part in parts:
        load_start, start = os.getloadavg()[0], time.perf_counter()
        print(f"bench: {part} ...", file=sys.stderr, flush=True)
        result = RUN[part](args)
        meta = {"date": dt.date.today().isoformat(), "load_start": load_start, "load_end": os.getloadavg()[0],
                "seconds": time.perf_counter() - start}
        results[part] = {"result": result, "meta": meta}
        out_json.write_text(json.dumps(results, indent=1))
        out_md.write_text(document(results, out_md.read_text() if out_md.is_file() else ""))
    print(render(results))


if __name__ == "__main__":
    main()
