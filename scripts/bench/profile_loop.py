"""Where the time of a training step goes outside the GPU step, and the host syncs of every method.

BENCHMARKS.md ("GPU end to end") measured SCCL's bf16 loop at 0.49-0.76x its raw step: 12-38 ms of every step
spent outside the step itself. This script profiles ``train(cfg)`` (the real DataModule, callbacks, logging and
optimizer of ``python run.py``) and, beside it, the raw step of the same module and batch layout
(scripts/bench/gpu_steps/raw_step.py's ``measure``: one batch reused, nothing else), and attributes a step's wall time:

- Lightning's own profiling hooks (every action Lightning times: fetching the next batch, moving it to the
  device, ``training_step``, ``backward``, the optimizer step, each callback's and the module's hooks), recorded
  by a profiler that keeps each action's *exclusive* time (a nested action's time is its own, not its parent's);
- collation (the collators' ``__call__``, in this process when ``loader.num_workers=0``; with workers, what the
  training process waits for is the fetch), ``self.log`` calls and Lightning's logging of a step's metrics;
- "other": the step's wall time less all of the above (Python and Lightning between the actions).

Host-side times of a GPU run are when the host was busy: kernels run asynchronously, so a step's forward may
"take" little and the time appear wherever the host next waits. The ``torch.profiler`` trace of a few steps
(``trace_<method>.json``, for chrome://tracing or Perfetto) shows both timelines; the table gives the GPU's busy
time within them (the sum of its kernels' time) against the wall time, so an idle GPU is visible. Steps/s end to
end come from the timed window only (after ``--warmup`` steps, without the trace).

``--count-syncs`` counts, on a GPU, every host sync CUDA reports (``torch.cuda.set_sync_debug_mode("warn")``)
in the steps between logging steps of SCCL, AECL (each stage), SimCSE, ClusterNS (clustering active) and
PairSupCon in bf16, by source line (docs/gpu.md, "A training loop that does not wait for the host").

On a CPU with ``--tiny`` the same code runs at smoke scale; what needs CUDA (the GPU timeline, the sync count)
is skipped with a note. Writes ``<out>/profile.md`` (a section for BENCHMARKS.md), ``<out>/profile.json`` and the
traces.

    python scripts/bench/profile_loop.py --out logs/profile [--methods sccl,aecl] [--precision bf16]
        [--steps 60 --warmup 10 --trace-steps 5] [--count-syncs] [--data-dir .gpu/data]
    python scripts/bench/profile_loop.py --tiny --out /tmp/profile     (a CPU check)
"""
from __future__ import annotations

import argparse
import collections
import contextlib
import datetime as dt
import json
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402

# the backbones, the raw step and the run.py overrides of the GPU benchmarks (scripts/bench/gpu.py)
from scripts.bench.gpu_steps import shared  # noqa: E402
from scripts.bench.gpu_steps.end_to_end import E2E_METHODS  # noqa: E402
from scripts.bench.gpu_steps.host_syncs import host_syncs  # noqa: E402
from scripts.bench.gpu_steps.raw_step import measure  # noqa: E402

CATEGORIES = ("data loading", "collation", "transfer to device", "training_step (forward, loss)", "backward",
              "optimizer", "callbacks and hooks", "logging", "other (Python, Lightning)")


def category(action: str) -> str:
    """The category of one of Lightning's profiled actions (its names: ``[Owner]name.hook`` / ``run_*``)."""
    if "dataloader_next" in action or action.endswith("train_dataloader_iter"):
        return "data loading"
    if "batch_to_device" in action:
        return "transfer to device"
    if action.endswith(".backward"):
        return "backward"
    if "optimizer_step" in action or "optimizer_zero_grad" in action or action.endswith("zero_grad"):
        return "optimizer"
    if action.endswith(".training_step"):
        return "training_step (forward, loss)"
    if action == "collation":
        return "collation"
    if action == "run_training_batch":  # Lightning's frame around a step: its own time is the loop's
        return "other (Python, Lightning)"
    if action.startswith("logging"):
        return "logging"
    return "callbacks and hooks"


class ExclusiveTimer:
    """A Lightning profiler (``trainer.profiler``) that keeps every action's exclusive host time while
    ``recording``, and marks each action in a running ``torch.profiler`` trace (``record_function``)."""

    def __init__(self):
        self.recording = False
        self.exclusive: collections.Counter = collections.Counter()
        self.stack: list[list] = []  # [name, start, time of nested actions, record_function context]

    # the lightning.pytorch.profilers.Profiler interface that Lightning calls
    def start(self, action_name: str) -> None:
        marker = torch.profiler.record_function(action_name)
        marker.__enter__()
        self.stack.append([action_name, time.perf_counter(), 0.0, marker])

    def stop(self, action_name: str) -> None:
        while self.stack:
            name, start, nested, marker = self.stack.pop()
            marker.__exit__(None, None, None)
            spent = time.perf_counter() - start
            if self.recording:
                self.exclusive[name] += spent - nested
            if self.stack:
                self.stack[-1][2] += spent
            if name == action_name:
                return

    @contextlib.contextmanager
    def profile(self, action_name: str):
        self.start(action_name)
        try:
            yield action_name
        finally:
            self.stop(action_name)

    def describe(self) -> None:
        pass

    def setup(self, *args, **kwargs) -> None:
        pass

    def teardown(self, *args, **kwargs) -> None:
        pass

    def __getattr__(self, name):  # anything else Lightning may ask of a profiler: nothing to do
        if name.startswith("__"):
            raise AttributeError(name)
        return lambda *args, **kwargs: None


@contextlib.contextmanager
def timed_calls(timer: ExclusiveTimer):
    """Collation (the collators of every datamodule) and logging (``LightningModule.log``, Lightning's step of
    writing the logged metrics) timed as actions of ``timer``; the classes are restored afterwards."""
    from lightning.pytorch import LightningModule
    from lightning.pytorch.trainer.connectors.logger_connector.logger_connector import _LoggerConnector

    from datamodules import nli, short_text, streaming_text

    targets = [(short_text.TextCollator, "__call__", "collation"),
               (streaming_text.TextCollator, "__call__", "collation"), (nli.NLICollator, "__call__", "collation"),
               (LightningModule, "log", "logging: self.log"),
               (_LoggerConnector, "update_train_step_metrics", "logging: metrics of the step")]
    saved = []
    for owner, name, action in targets:
        original = getattr(owner, name)
        saved.append((owner, name, original))

        def wrapper(*args, _original=original, _action=action, **kwargs):
            with timer.profile(_action):
                return _original(*args, **kwargs)

        setattr(owner, name, wrapper)
    try:
        yield
    finally:
        for owner, name, original in saved:
            setattr(owner, name, original)


def profiled_run(overrides: list[str], device: torch.device, warmup: int, timed: int, trace_steps: int,
                 trace_path: Path | None) -> dict:
    """One ``train(cfg)`` with ``warmup + timed + trace_steps`` steps: exclusive times over the timed window, then a
    ``torch.profiler`` trace of ``trace_steps`` steps (written to ``trace_path``) and the GPU's busy time there."""
    from lightning.pytorch.callbacks import Callback

    from ctclust.training import train as training

    timer = ExclusiveTimer()
    marks: dict = {}
    cuda = device.type == "cuda"

    def sync():
        if cuda:
            torch.cuda.synchronize(device)

    class Window(Callback):
        def setup(self, trainer, pl_module, stage):
            trainer.profiler = timer  # Lightning reads trainer.profiler at every action

        def on_train_batch_start(self, trainer, pl_module, batch, batch_idx):
            step = trainer.global_step
            if step == warmup:
                sync()
                timer.recording = True
                marks["timed_start"] = time.perf_counter()
            elif step == warmup + timed:
                sync()
                timer.recording = False
                marks["timed_end"] = time.perf_counter()
                if trace_steps:
                    activities = [torch.profiler.ProfilerActivity.CPU] + (
                        [torch.profiler.ProfilerActivity.CUDA] if cuda else [])
                    marks["profiler"] = torch.profiler.profile(activities=activities)
                    marks["profiler"].__enter__()
                    marks["trace_start"] = time.perf_counter()

        def on_train_end(self, trainer, pl_module):
            sync()
            if "profiler" in marks:
                marks["trace_end"] = time.perf_counter()
                marks["profiler"].__exit__(None, None, None)
            marks.setdefault("timed_end", time.perf_counter())

    cfg = shared.run_config(overrides)
    with shared.first_callbacks(Window()), timed_calls(timer):
        training.train(cfg)
    wall = marks["timed_end"] - marks["timed_start"]
    per_category = collections.Counter()
    for action, seconds in timer.exclusive.items():
        per_category[category(action)] += seconds
    per_category["other (Python, Lightning)"] += wall - sum(per_category.values())
    result = {"steps": timed, "ms_per_step": 1000 * wall / timed,
              "categories_ms": {c: 1000 * per_category[c] / timed for c in CATEGORIES},
              "actions_ms": {a: round(1000 * s / timed, 3) for a, s in timer.exclusive.most_common(25)},
              "gpu_busy_share": None, "trace": None, "top_ops": []}
    profiler = marks.get("profiler")
    if profiler is not None:
        if trace_path is not None:  # gzipped: Perfetto and chrome://tracing read it so, at a tenth of the size
            import gzip
            import shutil

            profiler.export_chrome_trace(str(trace_path))
            with trace_path.open("rb") as plain, gzip.open(f"{trace_path}.gz", "wb") as packed:
                shutil.copyfileobj(plain, packed)
            trace_path.unlink()
            result["trace"] = trace_path.name + ".gz"
        events = profiler.key_averages()
        key = "self_device_time_total" if cuda else "self_cpu_time_total"
        top = sorted(events, key=lambda e: getattr(e, key, 0), reverse=True)[:10]
        result["top_ops"] = [{"name": e.key, "ms_per_step": getattr(e, key, 0) / 1000 / trace_steps,
                              "calls_per_step": e.count / trace_steps} for e in top]
        if cuda:
            busy = sum(getattr(e, "self_device_time_total", 0) for e in events) / 1e6  # microseconds -> s
            result["gpu_busy_share"] = busy / (marks["trace_end"] - marks["trace_start"])
    return result


def raw_ms(method: str, folder: Path, batch: int, kind: str, device: torch.device, precision: str, chunk: int,
           steps: int, warmup: int) -> float:
    """The raw step (``raw_step.measure``: the module's step, backward and optimizer on one reused batch)."""
    torch.manual_seed(0)
    module, data, _ = shared.build(method, folder, batch, kind, device, "ours", chunk, 0, views=2)
    result = measure(module, data, precision, device, steps, warmup)
    return 1000 * result["seconds"]


# -- host syncs of every method ----------------------------------------------------------------------------------
def sync_runs(args, device: torch.device, tmp: Path) -> dict[str, list[str]]:
    """run.py overrides of each method's run whose quiet steps are counted (bf16, the paper's batch, real data)."""
    runs = {}
    for name, (method, extra) in {
        "sccl": ("sccl", []),
        "aecl, stage 1": ("aecl", ["method.e1=1000"]),
        "aecl, stage 2": ("aecl", ["method.e1=0", "method.e2=1000"]),
        "aecl, stage 3": ("aecl", ["method.e1=0", "method.e2=0"]),
    }.items():
        _, folder, batch, _ = shared.method_backbone(method, args.tiny, tmp)
        overrides = shared.run_overrides(method, folder, batch, "bf16", device, 0, args.sync_steps,
                                      shared.data_file("short").parent.resolve(), tmp / f"syncs_{len(runs)}")
        overrides = [o for o in overrides if not o.startswith(("method.e1=", "trainer.log_every_n_steps"))]
        runs[name] = overrides + extra
    common = ["trainer.max_epochs=-1", "trainer.enable_progress_bar=false", "~callbacks.progress",
              "~callbacks.progress_lines", "~callbacks.report", "~callbacks.model_summary", "print_table=false",
              "callbacks.checkpoint.every_n_steps=0", "callbacks.checkpoint.every_n_minutes=0",
              "callbacks.checkpoint.save_final=false", "trainer.enable_model_summary=false",
              f"trainer.max_steps={args.sync_steps}", f"++trainer.precision={shared.TRAINER['bf16'][1]}",
              f"trainer={'gpu' if device.type == 'cuda' else 'cpu'}"]
    for method, arch_key in (("simcse", "clusterns"), ("clusterns", "clusterns"), ("pairsupcon", "pairsupcon")):
        _, folder, batch, _ = shared.method_backbone(arch_key, args.tiny, tmp)
        if method == "pairsupcon":
            nli = shared.data_file("nli")
            data = ["dataset=nli", f"data_dir={nli.parent}", f"dataset.file={nli.name}", "~method.callbacks.sts_eval",
                    "~method.callbacks.final_eval"]
        else:
            data = ["dataset=wiki", f"dataset.path={shared.data_file('wiki')}", "~method.callbacks.sts_selection",
                    "~method.callbacks.sts_eval"]
            if method == "clusterns":  # clustering from the first step (kmean_cosine 1.0), K within the batch
                data += [f"method.num_clusters={min(128, batch)}", "method.kmean_cosine=1.0"]
        runs[method] = [f"method={method}", f"backbone.name={folder}", f"batch_size={batch}", *data, *common,
                        f"paths.output_dir={tmp / ('syncs_' + method)}"]
    return runs


def count_syncs(overrides: list[str], device: torch.device, steps: int) -> dict:
    """Syncs CUDA reports per step in the steps that neither log nor are the first two or the last; by source
    (scripts/bench/gpu_steps/host_syncs.py)."""
    quiet, total = host_syncs(overrides, device, steps)
    return {"steps": f"{quiet[0]}-{quiet[-1]}", "per_step": sum(total.values()) / max(1, len(quiet)),
            "sources": dict(total.most_common(8))}


# -- the section --------------------------------------------------------------------------------------------------
def render(rows: list[dict], syncs: dict, notes: list[str], args, device: torch.device) -> str:
    card = torch.cuda.get_device_name(device) if device.type == "cuda" else "CPU"
    lines = [f"### Where a step's time goes ({card})", "",
             f"_Measured {dt.date.today().isoformat()}; torch {torch.__version__}; "
             "`python scripts/bench/profile_loop.py " + " ".join(sys.argv[1:])
             + "`. Host-side exclusive ms per step over the timed window; GPU busy: the share of the traced steps' "
             "wall time the GPU spent in kernels._", ""]
    if rows:
        lines += ["| method | precision | end to end ms/step | raw ms/step | end to end / raw | "
                  + " | ".join(CATEGORIES) + " | GPU busy |", "|---" * (6 + len(CATEGORIES)) + "|"]
        for r in rows:
            busy = "-" if r["gpu_busy_share"] is None else f"{100 * r['gpu_busy_share']:.0f} %"
            lines.append(f"| {r['method']} | {r['precision']} | {r['ms_per_step']:.1f} | {r['raw_ms']:.1f} | "
                         f"{r['raw_ms'] / r['ms_per_step']:.2f} | "
                         + " | ".join(f"{r['categories_ms'][c]:.1f}" for c in CATEGORIES) + f" | {busy} |")
        for r in rows:
            ops = "; ".join(f"{o['name']} {o['ms_per_step']:.2f} ms ({o['calls_per_step']:.0f}x)"
                            for o in r["top_ops"][:6])
            where = "GPU" if device.type == "cuda" else "CPU"
            lines += ["", f"{r['method']}: the top operations of the traced steps ({where} self time per step): "
                      f"{ops or '-'}; trace: `{r['trace']}`."]
    if syncs:
        lines += ["", "Host syncs CUDA reported between logging steps (`torch.cuda.set_sync_debug_mode`), bf16:", "",
                  "| method | steps counted | syncs per step | sources |", "|---|---|---|---|"]
        for name, s in syncs.items():
            sources = ", ".join(f"{k} x{v}" for k, v in s["sources"].items()) or "-"
            lines.append(f"| {name} | {s['steps']} | {s['per_step']:.1f} | {sources} |")
    lines += [""] + [f"Note: {n}" for n in notes]
    return "\n".join(lines).rstrip() + "\n"


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--tiny", action="store_true", help="tiny backbones and batches, few steps: a CPU check")
    parser.add_argument("--methods", default="sccl,aecl", help=f"end-to-end methods among {E2E_METHODS}")
    parser.add_argument("--precision", default="bf16", choices=shared.PRECISIONS)
    parser.add_argument("--steps", type=int, default=None, help="timed steps (default 40; --tiny 3)")
    parser.add_argument("--warmup", type=int, default=None, help="steps before the timed window (default 10; --tiny 2)")
    parser.add_argument("--trace-steps", type=int, default=None, help="steps traced after it (default 5; --tiny 2)")
    parser.add_argument("--chunk", type=int, default=None, help="encoder_chunk_tokens of both the run and the raw "
                        "step (default: the device's, textcore/device_settings.py)")
    parser.add_argument("--count-syncs", action="store_true", help="also count CUDA's host syncs of every method")
    parser.add_argument("--sync-steps", type=int, default=12)
    parser.add_argument("--no-profile", action="store_true", help="only --count-syncs")
    parser.add_argument("--data-dir", type=Path, default=None, help="folder with stackoverflow.csv (and "
                        "wiki_sample.txt, nli_sample.csv for --count-syncs): a GPU machine's .gpu/data")
    parser.add_argument("--out", type=Path, required=True, help="folder for profile.md, profile.json, the traces")
    args = parser.parse_args(argv)
    steps = args.steps or (3 if args.tiny else 40)
    warmup = args.warmup if args.warmup is not None else (2 if args.tiny else 10)
    trace_steps = args.trace_steps if args.trace_steps is not None else 2 if args.tiny else 5
    if args.data_dir is not None:
        shared.DATA_DIR = args.data_dir
    device = torch.device(args.device)
    args.out.mkdir(parents=True, exist_ok=True)
    methods = [m for m in args.methods.split(",") if m]
    unknown = [m for m in methods if m not in E2E_METHODS]
    if unknown:
        sys.exit(f"error: --methods {','.join(unknown)}: the end-to-end rows train {', '.join(E2E_METHODS)} "
                 "on StackOverflow")
    if args.precision in ("fp16", "tf32") and device.type != "cuda":
        sys.exit(f"error: --precision {args.precision} needs a GPU (bf16 and fp32 also run on the CPU)")
    if args.chunk is None:
        from textcore import device_settings

        args.chunk = device_settings.GPU_CHUNK_TOKENS if device.type == "cuda" else device_settings.CPU_CHUNK_TOKENS
    notes, rows, syncs = [], [], {}
    if device.type != "cuda":
        notes.append("no CUDA device: the GPU timeline (GPU busy, kernel times) and the host-sync count are skipped; "
                     "the times are the CPU's at tiny scale, a check that the script runs, not a measurement")
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        for method in [] if args.no_profile else methods:
            arch, folder, batch, kind = shared.method_backbone(method, args.tiny, tmp)
            overrides = shared.run_overrides(method, folder, batch, args.precision, device, args.chunk,
                                          warmup + steps + trace_steps, shared.data_file("short").parent.resolve(),
                                          tmp / f"run_{method}")
            result = profiled_run(overrides, device, warmup, steps, trace_steps, args.out / f"trace_{method}.json")
            result.update(method=method, precision=args.precision, batch=batch, arch=arch,
                          raw_ms=raw_ms(method, folder, batch, kind, device, args.precision, args.chunk, steps,
                                        min(warmup, 3)))
            rows.append(result)
            print(f"profile_loop: {method}: {result['ms_per_step']:.1f} ms a step end to end, raw "
                  f"{result['raw_ms']:.1f}", flush=True)
        if args.count_syncs and device.type == "cuda":
            for name, overrides in sync_runs(args, device, tmp).items():
                syncs[name] = count_syncs(overrides, device, args.sync_steps)
                print(f"profile_loop: syncs: {name}: {syncs[name]['per_step']:.1f} a step, {syncs[name]['sources']}",
                      flush=True)
        elif args.count_syncs:
            notes.append("host syncs: skipped, CUDA reports them only on a GPU (tests/run/test_host_syncs.py counts "
                         "the value reads of every method on the CPU)")
    section = render(rows, syncs, notes, args, device)
    (args.out / "profile.md").write_text(section)
    record = {"device": str(device), "rows": rows, "syncs": syncs, "notes": notes}
    (args.out / "profile.json").write_text(json.dumps(record, indent=1) + "\n")
    print(section)
    return record


if __name__ == "__main__":
    main()
