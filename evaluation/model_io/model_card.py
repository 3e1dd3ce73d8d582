"""A Hugging Face model card (README.md) for a run exported with ``evaluation.model_io.export``: the method and its
paper, the resolved recipe, the training data, the results tables with their protocol names, the command
that produced the run, and the citation. Everything comes from the run folder (``results.json``,
``config_resolved.yaml``, ``.hydra/overrides.yaml``) and from what the method class declares."""
from __future__ import annotations

from pathlib import Path

from omegaconf import OmegaConf

from evaluation.clustering import catalogue
from textcore import run_folder

# method settings that describe the run rather than the recipe
NOT_RECIPE = {"_target_", "callbacks", "optimizer", "name"}


def _fmt(value) -> str:
    return f"{100 * value:.2f}" if isinstance(value, (int, float)) and not isinstance(value, bool) else "-"


def clustering_table(clustering: dict) -> list[str]:
    rows = [(name, clustering.get(name)) for name in ("before", "final")]
    rows = [(name, r) for name, r in rows if isinstance(r, dict)]
    if not rows:
        return []
    metrics = catalogue.with_labels()
    lines = ["### Clustering", "",
             "Protocol: KMeans with K = the number of classes on the evaluation pooling's embeddings (`kmeans_*`), "
             "and the method's own cluster head where it has one (`head_*`); accuracy after the Hungarian matching "
             "of clusters to classes, scikit-learn's NMI / ARI / AMI; x100.", "",
             "| embeddings | " + " | ".join(f"KMeans {m.title}" for m in metrics) + " | "
             + " | ".join(f"head {m.title}" for m in metrics) + " |",
             "|---" * (1 + 2 * len(metrics)) + "|"]
    for name, r in rows:
        label = "before training" if name == "before" else f"after training (step {r.get('step', '?')})"
        lines.append(f"| {label} | " + " | ".join(_fmt(r.get(f"kmeans_{m.name}")) for m in metrics) + " | "
                     + " | ".join(_fmt(r.get(f"head_{m.name}")) for m in metrics) + " |")
    return lines + [""]


def sts_table(sts: dict) -> list[str]:
    scores = sts.get("spearman") if isinstance(sts, dict) else None
    if not scores:
        return []
    tasks = list(scores)
    aggregation = sts.get("aggregation", "all")
    return ["### STS", "",
            f"Protocol: SentEval STS, Spearman correlation x100 of the cosine similarity with the gold scores; "
            f"STS12-16 in the `{aggregation}` aggregation; STS-B and SICK-R test sets.", "",
            "| " + " | ".join(tasks) + " | avg. |", "|---" * (len(tasks) + 1) + "|",
            "| " + " | ".join(_fmt(scores[t]) for t in tasks) + f" | {_fmt(sts.get('avg'))} |", ""]


def transfer_table(transfer: dict) -> list[str]:
    tasks = (transfer or {}).get("tasks") or {}
    done = [t for t in tasks if isinstance(tasks[t], dict) and "acc" in tasks[t]]
    if not done:
        return []
    return ["### Transfer", "", f"Protocol: {transfer.get('protocol_name', transfer.get('protocol', '?'))}; "
            "accuracy (%).", "", "| " + " | ".join(done) + " | avg. |", "|---" * (len(done) + 1) + "|",
            "| " + " | ".join(f"{tasks[t]['acc']:.2f}" for t in done) + f" | {transfer.get('avg', 0):.2f} |", ""]


def mteb_table(results: dict) -> list[str]:
    """MTEB's main score per task, from the headline of whichever end-of-run evaluation ran it."""
    rows = {}
    for section in ("final_evaluation", "mteb_evaluation"):
        for key, value in ((results.get(section) or {}).get("headline") or {}).items():
            if key.startswith("MTEB ") and value is not None:
                rows[key[len("MTEB "):]] = value
    if not rows:
        return []
    return ["### MTEB (MTEB's protocol, each task's main score x100)", "", "| task (metric) | score |", "|---|---|"] + [
        f"| {task} | {value:.2f} |" for task, value in rows.items()] + [""]


def command_of(run_dir: Path) -> str:
    parts = run_folder.RunFolder(run_dir).overrides() or []
    parts = [p for p in parts if not p.startswith(("hydra.run.dir", "paths.output_dir"))]
    return ("python run.py " + " ".join(parts)).rstrip()


def build_card(run_dir: str | Path, repo_id: str | None = None) -> str:
    """The model card of the run in ``run_dir`` (Markdown with the Hub's YAML header)."""
    from lightning_modules.shared.registry import method_class

    run = run_folder.RunFolder(run_dir)
    results = run.results() or {}
    cfg = OmegaConf.to_container(run.config(), resolve=False)
    method, dataset = cfg.get("method", {}), cfg.get("dataset", {})
    cls = method_class(method.get("_target_"), key=f"method._target_ of '{run.config_file}'")
    name = method.get("name", cls.__name__)
    recipe = {k: v for k, v in method.items() if k not in NOT_RECIPE}
    if recipe.get("num_clusters") is None and "num_clusters" in recipe:
        recipe["num_clusters"] = "the number of classes of the data"
    recipe.update({"batch_size": cfg.get("batch_size"), "seed": cfg.get("seed"), "steps": results.get("steps")})
    data = dataset.get("file") or dataset.get("path") or dataset.get("name")
    title = repo_id or f"{name} ({cfg.get('backbone', {}).get('name', '?')}) on {dataset.get('name', '?')}"
    lines = ["---", "library_name: sentence-transformers", "pipeline_tag: sentence-similarity",
             "tags: [sentence-transformers, feature-extraction, " + name + "]", "---", "", f"# {title}", "",
             f"A text encoder trained with **{name}** ({cls.paper or cls.__name__}) by this project's `run.py`.",
             "Load it with `SentenceTransformer(<this folder or repo>)`; the `hf/` folder of the export holds the "
             "plain Hugging Face model.", "", "## Training", "",
             f"- backbone: `{cfg.get('backbone', {}).get('name', '?')}`",
             f"- data: `{dataset.get('name', '?')}`" + (f" ({data})" if data != dataset.get("name") else ""),
             f"- command: `{command_of(run.path)}`", "",
             "Resolved recipe (the method's settings as the run used them):",
             "", "| setting | value |", "|---|---|"]
    lines += [f"| `{k}` | `{v}` |" for k, v in recipe.items()]
    lines += ["", "## Results", ""]
    tables = clustering_table(results.get("clustering") or {}) + sts_table(results.get("sts") or {})
    tables += transfer_table(((results.get("final_evaluation") or {}).get("transfer")) or {})
    tables += mteb_table(results)
    lines += tables or [f"No evaluation results in this run's {run_folder.RESULTS}.", ""]
    lines += ["## Citation", "", "```bibtex", cls.citation.strip() or f"% {cls.__name__}: no citation declared", "```",
              ""]
    return "\n".join(lines)
