"""BENCHMARKS.md from the numbers scripts/bench/bench.py records in BENCHMARKS.json, one section per part, the
notes in scripts/bench/notes.md and the sections other scripts write between markers.

    python scripts/bench/report.py                                   # render it again (no measurement)
    python scripts/bench/report.py --section <dir>/bench_gpu.md      # with a GPU section from scripts/bench/gpu_node.sh
"""
from __future__ import annotations

import os
import platform
from pathlib import Path

import numpy as np

PARTS = ("train", "eval", "e2e", "inrun", "memory", "scale", "corpus")
# the KMeans backends and precisions the eval part compares, in the table's order
EVAL_VARIANTS = (("sklearn", "float64"), ("sklearn", "float32"), ("fast", "float32"), ("faiss", "float32"))


def machine() -> str:
    cpu = "unknown CPU"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
        lines = Path("/proc/meminfo").read_text().splitlines()
        mem = next(int(x.split()[1]) for x in lines if x.startswith("MemTotal"))
        mem_gib = f"{mem / 1024**2:.1f} GiB RAM"
    except (OSError, StopIteration):
        mem_gib = "unknown RAM"
    import torch

    software = f"Python {platform.python_version()}, torch {torch.__version__} ({torch.get_num_threads()} threads)"
    return f"{cpu}, {os.cpu_count()} cores, {mem_gib}; {software}"


def verdict(ok: bool) -> str:
    return "meets target" if ok else "MISSES target"


def header(meta: dict) -> str:
    return (f"_Measured {meta['date']}; load average (1 min) {meta['load_start']:.2f} at start, "
            f"{meta['load_end']:.2f} at end; {meta['seconds']:.0f} s._")


def render_train(r: dict, meta: dict) -> list[str]:
    sccl = r["sccl_steps_per_s"]
    names = list(sccl)
    authors = sccl[names[0]]
    eq = r["sccl_equality"]
    lines = ["## Training steps/s at equal work (`--only train`)", "", header(meta), "",
             f"SCCL, batch {r['batch']} on StackOverflow, three encoder passes per step (original text, its "
             f"augmentation, and the original again as second view; {r.get('backbone', 'minilm')}, max_length 32). Every variant runs "
             f"the same {r['steps']} batches in {r['rounds']} interleaved rounds after 2 warm-up steps; a step is "
             "tokenisation + forward + backward + Adam. The authors' code is not in this repository: their step "
             "is re-implemented in `scripts/bench/reference_step.py` (`AuthorsSCCLStep`) as their code computes it: three "
             "backbone calls on texts padded to max_length 32, PairConLoss (tau 0.5) on the two views, "
             "KLDivLoss(log(q + 1e-8), p) / B on the original, eta = 1.", "",
             "| SCCL variant | steps/s | vs the authors | encoder tokens per step |", "|---|---|---|---|"]
    tokens = list(r["sccl_tokens_per_step"].values())
    for i, name in enumerate(names):
        lines.append(f"| {name} | {sccl[name]:.3f} | {sccl[name] / authors:.2f}x | {tokens[i]:.0f} |")
    best = sccl[names[-1]] / authors
    lines += ["", f"Text tokens per step (no padding at all): {r['sccl_tokens_per_step']['text tokens']:.0f}. "
              f"Target >= 1.6x the authors' steps/s with the default: {best:.2f}x, {verdict(best >= 1.6)}.", "",
              f"Equality on {eq['batches']} batches, dropout off ({eq['parameters_compared']} parameter tensors):", "",
              "| comparison | max abs loss difference | max relative gradient difference (per tensor) |", "|---|---|---|",
              f"| ours chunking off vs the authors' step | {eq['loss_diff_unchunked_vs_authors']:.2e} | "
              f"{eq['grad_rel_diff_unchunked_vs_authors']:.2e} |",
              f"| ours chunked (default) vs ours chunking off | {eq['loss_diff_chunked_vs_unchunked']:.2e} | "
              f"{eq['grad_rel_diff_chunked_vs_unchunked']:.2e} |", "",
              f"Losses of the first batch: authors {eq['authors_loss']:.6f}, ours unchunked {eq['unchunked_loss']:.6f}, "
              f"ours chunked {eq['chunked_loss']:.6f} (target: equal to 1e-5: "
              f"{verdict(eq['loss_diff_unchunked_vs_authors'] <= 1e-5 and eq['loss_diff_chunked_vs_unchunked'] <= 1e-5)}).",
              "", f"AECL (two views: original and augmentation), {r['aecl_steps']} steps per variant, interleaved:", "",
              "| AECL stage | variant | steps/s | vs padded to 32 |", "|---|---|---|---|"]
    for stage, rates in r["aecl_steps_per_s"].items():
        base = next(iter(rates.values()))
        for name, value in rates.items():
            lines.append(f"| {stage} | {name} | {value:.3f} | {value / base:.2f}x |")
    lines += ["", "AECL equality, chunked vs unchunked, dropout off: " + "; ".join(
        f"{stage}: loss {v['loss_diff_chunked_vs_unchunked']:.1e}, gradients {v['grad_rel_diff_chunked_vs_unchunked']:.1e}"
        for stage, v in r["aecl_equality"].items()) + ".", ""]
    return lines


def render_eval(r: dict, meta: dict) -> list[str]:
    variants = [f"{b} {d}" for b, d in EVAL_VARIANTS]
    data = r["datasets"]
    lines = ["## Evaluation: the 10-seed clustering protocol (`--only eval`)", "", header(meta), "",
             f"{r.get('backbone', 'minilm')}, mean pooling, max_length 32; KMeans with seeds {r['seeds'][0]}-{r['seeds'][-1]}, "
             f"{r['n_init']} restarts each. Each set is embedded once (length-sorted batches, duplicates once). "
             + (f"Not present: {', '.join(r['skipped'])}." if r["skipped"] else ""), "",
             "| | " + " | ".join(variants) + " |", "|---|" + "---|" * len(variants)]
    embed = sum(d["embed_seconds"] for d in data.values())
    totals = {v: embed + sum(d["backends"][v]["kmeans_seconds"] + d["backends"][v]["metric_seconds"]
                             for d in data.values()) for v in variants}
    lines.append("| protocol time, all sets (s) | " + " | ".join(f"{totals[v]:.0f}" for v in variants) + " |")
    lines.append("| of which embedding (s) | " + " | ".join(f"{embed:.0f}" for _ in variants) + " |")
    lines.append("| of which KMeans (s) | " + " | ".join(
        f"{sum(d['backends'][v]['kmeans_seconds'] for d in data.values()):.0f}" for v in variants) + " |")
    lines.append("| of which metrics (s) | " + " | ".join(
        f"{sum(d['backends'][v]['metric_seconds'] for d in data.values()):.1f}" for v in variants) + " |")
    for metric in ("acc", "nmi"):
        lines.append(f"| mean {metric.upper()} over the sets | " + " | ".join(
            f"{100 * np.mean([d['backends'][v][metric] for d in data.values()]):.2f}" for v in variants) + " |")
    lines += ["", f"Per set, mean (std over seeds) x100 and KMeans seconds for the {len(r['seeds'])} seeds:", "",
              "| set | n | k | embed s | " + " | ".join(f"{v} ACC | {v} NMI | {v} s" for v in variants) + " |",
              "|---|---|---|---|" + "---|---|---|" * len(variants)]
    for name, d in data.items():
        cells = []
        for v in variants:
            b = d["backends"][v]
            cells += [f"{100 * b['acc']:.2f} ({100 * b['acc_std']:.2f})", f"{100 * b['nmi']:.2f} ({100 * b['nmi_std']:.2f})",
                      f"{b['kmeans_seconds']:.1f}"]
        lines.append(f"| {name} | {d['n']} | {d['k']} | {d['embed_seconds']:.0f} | " + " | ".join(cells) + " |")
    lines += ["", "Within the seed spread: per set, |mean(backend) - mean(sklearn float64, the older protocol)| "
              "against the larger of the two standard deviations over seeds:", "",
              "| set | backend | ACC diff | NMI diff | spread (ACC / NMI) | within |", "|---|---|---|---|---|---|"]
    for name, d in data.items():
        b = d["backends"]["sklearn float64"]
        for v in variants[1:]:
            a = d["backends"][v]
            da, dn = abs(a["acc"] - b["acc"]), abs(a["nmi"] - b["nmi"])
            sa, sn = max(a["acc_std"], b["acc_std"]), max(a["nmi_std"], b["nmi_std"])
            lines.append(f"| {name} | {v} | {100 * da:.2f} | {100 * dn:.2f} | {100 * sa:.2f} / {100 * sn:.2f} | "
                         f"{'yes' if da <= sa and dn <= sn else 'no'} |")
    return lines + [""]


def render_e2e(r: dict, meta: dict) -> list[str]:
    kmeans = r.get("kmeans") or {}
    return ["## `evaluate_model` end to end (`--only e2e`)", "", header(meta), "",
            f"`{r['command']}` ({len(r['datasets'])} sets, 10 seeds, KMeans {kmeans.get('backend')} with "
            f"{kmeans.get('n_init')} restarts): **{r['wall_seconds']:.0f} s** wall, of which embedding "
            f"{r['embed_seconds']:.0f} s; average ACC {100 * r['avg']['acc']:.2f}, NMI {100 * r['avg']['nmi']:.2f}. "
            f"Target <= 150 s: {verdict(r['wall_seconds'] <= 150)} (785 s with the older float64 protocol).", ""]


def render_inrun(r: dict, meta: dict) -> list[str]:
    lines = ["## One periodic in-run evaluation, SCCL on StackOverflow (`--only inrun`)", "", header(meta), "",
             f"What `ClusteringEvaluator` does every N steps: embed the {r['n']} texts (length-sorted batches of 256), "
             "KMeans (seed 0, 10 restarts), ACC/NMI/ARI/AMI of KMeans and of the cluster head.", "",
             "| variant | encoder s | KMeans s | metrics s | total s | KMeans ACC |", "|---|---|---|---|---|---|"]
    for name, v in r["variants"].items():
        lines.append(f"| {name} | {v['encoder_seconds']:.1f} | {v['kmeans_seconds']:.1f} | {v['metric_seconds']:.2f} | "
                     f"{v['total_seconds']:.1f} | {100 * v['kmeans_acc']:.2f} |")
    total = list(r["variants"].values())[-1]["total_seconds"]
    return lines + ["", f"Target <= 25 s with the default: {total:.1f} s, {verdict(total <= 25)}.", ""]


def render_memory(r: dict, meta: dict) -> list[str]:
    lines = ["## Peak memory of a training run (`--only memory`)", "", header(meta), "",
             "| encoder_chunk_tokens | peak RSS (GiB) | wall (s) |", "|---|---|---|"]
    for chunk, v in r["runs"].items():
        lines.append(f"| {chunk} | {v['peak_gib']:.2f} | {v['wall_seconds']:.0f} |")
    first = next(iter(r["runs"].values()))
    return lines + ["", f"Command: `{first['command']}` (and `encoder_chunk_tokens=0`): model load, KMeans "
                    f"initialisation and evaluation on all texts before training, {r['steps']} training steps, final "
                    "evaluation. Peak RSS: `getrusage(RUSAGE_CHILDREN).ru_maxrss` of the run.", ""]


def render_scale(r: dict, meta: dict) -> list[str]:
    def phases(run: dict) -> str:
        p, e = run.get("phases") or {}, run.get("evaluation") or {}
        return " | ".join(f"{p.get(k, 0):.0f}" for k in ("read", "start_up", "training", "end")) + \
            f" | {e.get('evaluations', 0):.0f}"

    lines = ["## A corpus of 10k to 1M texts (`--only scale`)", "", header(meta), "",
             f"A generated corpus of 8 topics (the demo corpus's words; scripts/bench/scale.py), {r['steps']} steps, an "
             f"evaluation every {r['every_n_steps']} steps (on a seeded sample of `eval_sample` texts; the last one on "
             "every text). Phases from results.json `seconds`: read the file; start-up (the evaluation before training "
             "and SCCL's centroids); training (the steps and the evaluations between them); end (the last "
             "evaluation, predictions.csv, clusters.md, plots, report.html). Evaluations: their seconds in all, "
             "embedding passes included.", "",
             "| backbone | texts | wall (s) | peak RSS (GiB) | read | start-up | training | end | evaluations |",
             "|---|---|---|---|---|---|---|---|---|"]
    for run in r["runs"] + ([r["minilm"]] if r.get("minilm") else []):
        lines.append(f"| {run['backbone']} | {run['texts']:,} | {run['wall_seconds']:.0f} | {run['peak_gib']:.2f} | "
                     f"{phases(run)} |")
    if r.get("exponent_last") is not None:
        sizes = [run["texts"] for run in r["runs"]]
        lines += ["", f"Growth exponent of the wall time from {sizes[-2]:,} to {sizes[-1]:,} texts: "
                      f"**{r['exponent_last']:.2f}** (target <= 1.1: {verdict(r['exponent_last'] <= 1.1)}); fitted over "
                      f"every size: {r['exponent_fit']:.2f}."]
    largest = r["runs"][-1]
    if largest["texts"] >= 1_000_000:
        ok = largest["wall_seconds"] < 600 and largest["peak_gib"] < 4
        lines.append(f"{largest['texts']:,} texts: {largest['wall_seconds'] / 60:.1f} min, {largest['peak_gib']:.2f} GiB "
                     f"(target under 10 min and 4 GB: {verdict(ok)}).")
    if r.get("minilm"):
        m = r["minilm"]
        lines.append(f"MiniLM at {m['texts']:,} texts: {m['wall_seconds'] / 60:.1f} min (target under 15 min: "
                     f"{verdict(m['wall_seconds'] < 900)}).")
    if r.get("predict"):
        small, large = r["predict"][0], r["predict"][-1]
        ratio = large["peak_gib"] / small["peak_gib"]
        lines += ["", "| `tools.py predict` | wall (s) | peak RSS (GiB) |", "|---|---|---|"]
        lines += [f"| {p['texts']:,} new texts | {p['wall_seconds']:.0f} | {p['peak_gib']:.2f} |" for p in r["predict"]]
        lines.append("")
        lines.append(f"Peak memory of {large['texts']:,} against {small['texts']:,} new texts: {ratio:.2f}x (target "
                     f"within 1.2x: {verdict(ratio <= 1.2)}).")
    lines += ["", "Commands: " + "; ".join(f"`{run['command']}`" for run in r["runs"][-1:] + r.get("predict", [])[-1:]),
              ""]
    return lines


def render_corpus(r: dict, meta: dict) -> list[str]:
    def row(p: dict) -> str:
        threads = "default" if p["threads"] is None else str(p["threads"])
        peaks = ", ".join(f"{g:.2f}" for g in p["peak_gib"])
        return (f"| {p['device']} | {p['processes']} | {threads} | {p['texts']:,} | {p['wall_seconds']:.0f} | "
                f"{p['texts_per_second']:,.0f} | {p['texts_per_second'] / p['processes']:,.0f} | {peaks} | "
                f"{p['parts_mib']:.0f} |")

    lines = ["## `tools.py predict` on several processes (`--only corpus`)", "", header(meta), "",
             f"{r['model']}; new texts generated as in the scale part (scripts/bench/corpus.py), written as a folder "
             "of parts (`part-<shard>.parquet`, 20,000 rows each). Wall: the whole command (start-up, the one pass "
             "that cuts the input into shards, the processes' start). Texts/s: the predict loop (every process "
             "started), all processes together. Peak RSS: each process's own (`getrusage`), rank 0 first.", "",
             "| device | processes | threads each | texts | wall (s) | texts/s | texts/s per process | peak RSS per "
             "process (GiB) | parts (MiB) |", "|---|---|---|---|---|---|---|---|---|"]
    lines += [row(p) for p in r["cpu"] + r.get("gpu", [])]
    cpu = r["cpu"]
    one, two = cpu[0], cpu[1]
    lines += ["", f"Two CPU processes against one ({one['texts']:,} texts, one thread each): "
                  f"{two['texts_per_second'] / one['texts_per_second']:.2f}x the texts/s."]
    large = [p for p in cpu if p["texts"] > one["texts"] and p["processes"] == two["processes"]]
    if large:
        ratio = max(large[-1]["peak_gib"]) / max(two["peak_gib"])
        lines.append(f"Peak memory per process, {large[-1]['texts']:,} against {two['texts']:,} texts on "
                     f"{two['processes']} processes: {ratio:.2f}x (target within 1.2x: {verdict(ratio <= 1.2)}).")
    gpu = r.get("gpu") or []
    if len(gpu) > 1:
        efficiency = gpu[-1]["texts_per_second"] / (gpu[-1]["processes"] * gpu[0]["texts_per_second"])
        lines.append(f"{r.get('gpu_name', 'GPU')}: {gpu[-1]['processes']} GPUs give {efficiency:.0%} of "
                     f"{gpu[-1]['processes']} x one GPU's texts/s (scaling efficiency).")
    elif gpu:
        lines.append(f"{r.get('gpu_name', 'GPU')}: one GPU only, so no scaling efficiency.")
    else:
        lines.append("No GPU on this machine: the GPU rows are missing (the same command records them where "
                     "there is one).")
    lines += ["", "Commands: " + "; ".join(f"`{p['command']}`" for p in cpu + gpu), ""]
    return lines


RENDER = {"train": render_train, "eval": render_eval, "e2e": render_e2e, "inrun": render_inrun,
          "memory": render_memory, "scale": render_scale, "corpus": render_corpus}


def render(results: dict) -> str:
    lines = ["# Benchmarks", "", "Written by `python scripts/bench/report.py` from the numbers in BENCHMARKS.json "
             "(`make bench`: `python scripts/bench/bench.py`, parts `--only " + ",".join(PARTS) + "`), the notes in "
             "scripts/bench/notes.md and the sections `scripts/bench/grad_cache.py` and `scripts/bench/gpu.py` write "
             "between their markers. Each section says when it was measured, on what, and with which command; numbers "
             "from a loaded machine are not comparable. Commands name the project's data folder (`data/`); the runs "
             "read the same files from a copy outside the checkout.", "", f"Machine of the CPU sections: "
             f"{results.get('machine', '?')}", ""]
    for part in PARTS:
        if part in results:
            lines += RENDER[part](results[part]["result"], results[part]["meta"])
    return "\n".join(lines)


# sections that other scripts write between their markers, kept when the file is rendered again
KEPT = ("grad-cache", "backends", "bench-gpu")  # backends: scripts/bench/backends.py
NOTES = Path(__file__).with_name("notes.md")


def marked(text: str, name: str) -> str | None:
    """The section ``<!-- name:start --> ... <!-- name:end -->`` of ``text``, markers included."""
    start, end = f"<!-- {name}:start -->", f"<!-- {name}:end -->"
    if start not in text or end not in text:
        return None
    return text[text.index(start): text.index(end) + len(end)]


def document(results: dict, previous: str, sections: dict[str, str] | None = None) -> str:
    """BENCHMARKS.md: bench.py's parts, the grad-cache and backends sections, the notes, the GPU section. A kept section
    comes from ``sections`` (name -> text) when given there, else from ``previous`` (the file as it is)."""
    kept = {name: (sections or {}).get(name) or marked(previous, name) for name in KEPT}
    parts = [render(results).rstrip("\n")]
    if kept["grad-cache"]:
        parts.append(kept["grad-cache"])
    if kept["backends"]:
        parts.append(kept["backends"])
    parts.append(NOTES.read_text().strip("\n"))
    if kept["bench-gpu"]:
        parts.append(kept["bench-gpu"])
    return "\n\n".join(parts) + "\n"


def main(argv: list[str] | None = None) -> int:
    import argparse
    import json

    root = Path(__file__).resolve().parents[2]
    parser = argparse.ArgumentParser(description="Render BENCHMARKS.md again from BENCHMARKS.json, "
                                     "scripts/bench/notes.md and the marked sections (no measurement is made).")
    parser.add_argument("--out", type=Path, default=root / "BENCHMARKS.md")
    parser.add_argument("--section", type=Path, action="append", default=[],
                        help="a file with a marked section (scripts/bench/gpu.py --out, grad_cache.py --out) that "
                        "replaces the section of that name, e.g. the bench_gpu.md of scripts/bench/gpu_node.sh")
    args = parser.parse_args(argv)
    results = json.loads(args.out.with_suffix(".json").read_text())
    sections = {}
    for path in args.section:
        found = {name: marked(path.read_text(), name) for name in KEPT}
        if not any(found.values()):
            raise SystemExit(f"error: {path} has no section between the markers of {', '.join(KEPT)}")
        sections.update({name: text for name, text in found.items() if text})
    previous = args.out.read_text() if args.out.is_file() else ""
    args.out.write_text(document(results, previous, sections))
    print(f"report: {args.out} rendered again" + (f" with {', '.join(sections)} from --section" if sections else ""))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
