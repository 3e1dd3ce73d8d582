"""The papers' directions, compared from the fidelity runs: each variant minus its baseline, paired by seed.

    python scripts/studies/fidelity_report.py logs/fidelity                # every group found under the folder
    python scripts/studies/fidelity_report.py logs/fidelity --out fidelity_report.md
    python scripts/studies/fidelity_report.py logs/fidelity --versus logs/fidelity_gpu   # the same groups elsewhere

``evaluation.across_runs.aggregate`` gives each setting's mean ± std; this adds what the papers' claims are about:
the difference to the baseline of the same seed (same data order and initialisation), its mean ±
sample std over the seeds, and how many seeds it has the paper's sign on. For AECL it also reads the
head's scores at every evaluation step and the share of confident pseudo-labels in stage 3 from
``csv/metrics.csv``, since the head is AECL's prediction and stage 3 is where the two forms differ.

Each group folder is the ``--out``/``<group>`` of ``scripts/studies/fidelity_runs.py`` (parts in subfolders
are read too). Nothing here selects a step or a setting with the labels: the final step is used, and
the AECL curve shows every evaluation step.
"""
from __future__ import annotations

import argparse
import csv
import statistics
import sys
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from evaluation.across_runs.aggregate import Run, cell_stats, fmt_cell, load_run  # noqa: E402
from runtime.objective import lookup  # noqa: E402
from textcore.run_folder import find_runs, is_finite_number  # noqa: E402


@dataclass(frozen=True)
class Comparison:
    """``variant - baseline`` for ``metric``; ``sign`` is +1 where the paper says the variant is higher."""

    group: str
    metric: str  # dotted key into results.json
    label: str
    variant: dict
    baseline: dict
    sign: int = 1
    baseline_group: str | None = None  # the baseline's runs are in another group's folder


SCCL = ("clustering.final.kmeans_acc", "clustering.final.kmeans_nmi", "clustering.final.head_acc",
        "clustering.final.head_nmi")
PSC_CLUSTER = ("final_evaluation.headline.clustering ACC avg (3 sets)",
               "final_evaluation.headline.clustering NMI avg (3 sets)")


def _metric_name(key: str) -> str:
    return key.replace("clustering.final.", "").replace("final_evaluation.headline.clustering ", "")


COMPARISONS: list[Comparison] = [
    # SCCL Table 3: both ablations below joint training
    *[Comparison("sccl_ablation", m, f"{v} only - joint", {"method.objective": v}, {"method.objective": "joint"}, -1)
      for v in ("instance", "cluster") for m in SCCL],
    # ClusterNS above SimCSE, at one rate and at each paper rate
    *[Comparison("clusterns_vs_simcse", m, label, {"method.name": "clusterns", "method.lr": lr_c},
                 {"method.name": "simcse", "method.lr": lr_s})
      for m in ("sts.avg", "sts_selection.best")
      for label, lr_c, lr_s in (("ClusterNS - SimCSE, both 3e-5", 3e-5, 3e-5),
                                ("ClusterNS - SimCSE, both 5e-5", 5e-5, 5e-5),
                                ("ClusterNS 5e-5 - SimCSE 3e-5 (paper rates)", 5e-5, 3e-5))],
    # PairSupCon: both objectives above each alone; instance above classification for clustering
    *[Comparison("pairsupcon_modes", m, f"{v} only - both", {"method.mode": v}, {"method.mode": "both"}, -1)
      for v in ("classification", "instance") for m in ("sts.avg", *PSC_CLUSTER)],
    *[Comparison("pairsupcon_modes", m, "instance only - classification only", {"method.mode": "instance"},
                 {"method.mode": "classification"}) for m in PSC_CLUSTER],
    # AECL: the authors' code vs the paper's losses (no direction claimed: sign 0)
    *[Comparison("aecl_forms", m, "reference=true - paper form", {"method.reference": True},
                 {"method.reference": False}, 0) for m in SCCL],
    # AECL above SCCL at the same budget (the paper's Table 2 row for SearchSnippets)
    *[Comparison("aecl_forms", m, f"AECL ({form}) - SCCL", {"method.reference": ref}, {"method.name": "sccl"}, 1,
                 baseline_group="sccl_at_aecl_budget")
      for form, ref in (("paper form", False), ("reference=true", True)) for m in SCCL],
]


def matches(run: Run, wanted: dict) -> bool:
    for key, value in wanted.items():
        have = run.config.get(key)
        if isinstance(value, float):
            if not isinstance(have, (int, float)) or abs(float(have) - value) > 1e-12:
                return False
        elif have != value:
            return False
    return True


def to_fraction(metric: str, value: float) -> float:
    """results.json keeps scores as fractions, except final_evaluation's headline (already x100)."""
    return value / 100 if metric.startswith("final_evaluation.headline") else value


def by_seed(runs: list[Run], wanted: dict, metric: str) -> dict[int, float]:
    values = {}
    for run in runs:
        if run.results is None or not matches(run, wanted):
            continue
        try:
            value = lookup(run.results, metric)
        except KeyError:  # the run did not compute it (e.g. no final evaluation)
            continue
        if is_finite_number(value):
            values[int(run.seed)] = to_fraction(metric, float(value))
    return values


def paired(variant: dict[int, float], baseline: dict[int, float]) -> dict:
    """Differences on the seeds both have: per seed, mean, sample std (ddof=1, None for one seed)."""
    seeds = sorted(set(variant) & set(baseline))
    diffs = [variant[s] - baseline[s] for s in seeds]
    return {"seeds": seeds, "diffs": diffs,
            "mean": statistics.fmean(diffs) if diffs else None,
            "std": statistics.stdev(diffs) if len(diffs) > 1 else None}


def _x100(value: float | None, signed: bool = False) -> str:
    if value is None:
        return "-"
    return f"{100 * value:+.2f}" if signed else f"{100 * value:.2f}"


def comparison_rows(groups: dict[str, list[Run]]) -> list[dict]:
    rows = []
    for comp in COMPARISONS:
        runs = groups.get(comp.group)
        base_runs = groups.get(comp.baseline_group or comp.group)
        if runs is None or base_runs is None:
            continue
        variant, baseline = by_seed(runs, comp.variant, comp.metric), by_seed(base_runs, comp.baseline, comp.metric)
        result = paired(variant, baseline)
        if not result["seeds"]:
            continue
        agree = None if comp.sign == 0 else sum(1 for d in result["diffs"] if d * comp.sign > 0)
        rows.append({"group": comp.group, "comparison": comp.label, "metric": _metric_name(comp.metric),
                     **result, "variant_mean": statistics.fmean(variant[s] for s in result["seeds"]),
                     "baseline_mean": statistics.fmean(baseline[s] for s in result["seeds"]),
                     "paper_sign": comp.sign, "seeds_with_paper_sign": agree})
    return rows


def comparison_markdown(rows: list[dict]) -> list[str]:
    lines = ["| group | comparison | metric | variant | baseline | difference (mean ± std over seeds) | "
             "per seed | seeds with the paper's sign |", "|---|---|---|---:|---:|---:|---|---:|"]
    for r in rows:
        std = f" ± {100 * r['std']:.2f}" if r["std"] is not None else ""
        per_seed = ", ".join(f"{s}: {_x100(d, True)}" for s, d in zip(r["seeds"], r["diffs"]))
        agree = "no claim" if r["seeds_with_paper_sign"] is None else f"{r['seeds_with_paper_sign']}/{len(r['seeds'])}"
        lines.append(f"| {r['group']} | {r['comparison']} | {r['metric']} | {_x100(r['variant_mean'])} | "
                     f"{_x100(r['baseline_mean'])} | {_x100(r['mean'], True)}{std} | {per_seed} | {agree} |")
    return lines


def read_metrics(run: Run) -> list[dict]:
    path = run.path / "csv" / "metrics.csv"
    if not path.is_file():
        return []
    with path.open(encoding="utf-8", newline="") as handle:
        return list(csv.DictReader(handle))


def _form(reference: bool) -> str:
    return "reference=true" if reference else "paper form"


def _mean_std(values: list[float]) -> str:
    """x100 mean ± sample std as evaluation.across_runs.aggregate prints a cell."""
    stats = cell_stats(values, []) if values else None
    return fmt_cell(stats, stats["n"] if stats else None)


def aecl_curves(runs: list[Run]) -> list[str]:
    """Head and KMeans ACC at each evaluation step, and the stage-3 confident share, per form."""
    forms: dict[bool, dict[int, dict[str, list[float]]]] = {}
    stage3: dict[bool, list[float]] = {}
    for run in runs:
        reference = bool(run.config.get("method.reference"))
        steps = forms.setdefault(reference, {})
        shares = []
        for row in read_metrics(run):
            step = int(float(row["step"])) if row.get("step") else None
            for key in ("val/head_acc", "val/kmeans_acc"):
                if row.get(key):
                    steps.setdefault(step, {}).setdefault(key, []).append(float(row[key]))
            if row.get("train/confident_share") and row.get("train/stage") and float(row["train/stage"]) == 3:
                shares.append(float(row["train/confident_share"]))
        if shares:
            stage3.setdefault(reference, []).append(statistics.fmean(shares))
    lines = ["| form | step | head ACC | KMeans ACC | seeds |", "|---|---:|---:|---:|---:|"]
    for reference in sorted(forms):
        name = _form(reference)
        for step in sorted(forms[reference]):
            cell = forms[reference][step]
            head, km = cell.get("val/head_acc", []), cell.get("val/kmeans_acc", [])
            lines.append(f"| {name} | {step} | {_mean_std(head)} | {_mean_std(km)} | {len(head)} |")
    for reference, shares in sorted(stage3.items()):
        lines.append("")
        lines.append(f"{_form(reference)}: mean share of confident samples over the stage-3 steps logged, per run: "
                     + ", ".join(f"{100 * s:.1f} %" for s in shares))
    return lines


def head_cluster_sizes(run: Run) -> list[int]:
    """Sizes of the final head's clusters (predictions.csv), largest first; [] without the file."""
    path = run.path / "predictions.csv"
    if not path.is_file():
        return []
    with path.open(encoding="utf-8", newline="") as handle:
        counts = Counter(row["head_cluster"] for row in csv.DictReader(handle) if row.get("head_cluster") != "")
    return sorted(counts.values(), reverse=True)


def aecl_runs(runs: list[Run]) -> list[str]:
    """One line per AECL run: the head's ACC at every evaluation, and how the final head fills its clusters."""
    lines = []
    for run in sorted(runs, key=lambda r: (bool(r.config.get("method.reference")), int(r.seed))):
        curve = [(int(float(row["step"])), float(row["val/head_acc"])) for row in read_metrics(run)
                 if row.get("val/head_acc")]
        sizes = head_cluster_sizes(run)
        filled = (f"; final head: {len(sizes)} of {run.config.get('dataset.num_clusters', '?')} clusters used, "
                  f"the largest {sizes[0]} of {sum(sizes)} texts") if sizes else ""
        lines.append(f"- {_form(bool(run.config.get('method.reference')))}, seed {run.seed}: head ACC "
                     + ", ".join(f"{step}: {100 * acc:.1f}" for step, acc in curve) + filled)
    return lines


def device_differences(first: dict[str, list[Run]], second: dict[str, list[Run]]) -> list[str]:
    """``first - second`` per setting and seed, for the groups in both folders (e.g. CPU vs GPU runs)."""
    lines = ["| group | metric | setting-seed pairs | mean difference | largest absolute |", "|---|---|---:|---:|---:|"]
    for group in sorted(set(first) & set(second)):
        comparisons = [c for c in COMPARISONS if c.group == group and c.baseline_group is None]
        settings = list({repr(sorted(w.items())): w for c in comparisons for w in (c.variant, c.baseline)}.values())
        for metric in dict.fromkeys(c.metric for c in comparisons):
            diffs = []
            for wanted in settings:
                a, b = by_seed(first[group], wanted, metric), by_seed(second[group], wanted, metric)
                diffs += [a[s] - b[s] for s in sorted(set(a) & set(b))]
            if diffs:
                mean, largest = statistics.fmean(diffs), max(abs(d) for d in diffs)
                lines.append(f"| {group} | {_metric_name(metric)} | {len(diffs)} | {_x100(mean, True)} "
                             f"| {_x100(largest)} |")
    return lines


def read_groups(folder: Path) -> dict[str, list[Run]]:
    groups = {}
    for child in sorted(folder.iterdir()):
        if child.is_dir():
            runs = [load_run(p) for p in find_runs([child])]
            if runs:
                groups[child.name] = runs
    return groups


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("folder", type=Path, help="the --out folder of scripts/studies/fidelity_runs.py")
    parser.add_argument("--out", type=Path, help="also write the Markdown here")
    parser.add_argument("--versus", type=Path, metavar="FOLDER", help="another --out folder with the same groups "
                        "(e.g. the same runs on another device): FOLDER's scores subtracted per setting and seed")
    args = parser.parse_args(argv)
    for folder in filter(None, (args.folder, args.versus)):
        if not folder.is_dir():
            print(f"error: {folder}: no such folder (give the --out folder of scripts/studies/fidelity_runs.py)",
                  file=sys.stderr)
            return 2
    groups = read_groups(args.folder)
    if not groups:
        print(f"error: {args.folder}: no group folders with runs", file=sys.stderr)
        return 2
    lines = [f"# Paired differences of {args.folder}", "",
             "Numbers x100. Difference = variant - baseline of the same seed; mean ± sample std (ddof=1) "
             "over the seeds; final step of every run.", "", *comparison_markdown(comparison_rows(groups))]
    if "aecl_forms" in groups:
        lines += ["", "## AECL at every evaluation step (mean ± std over seeds)", "",
                  *aecl_curves(groups["aecl_forms"]), "", "Each run:", "", *aecl_runs(groups["aecl_forms"])]
    if args.versus:
        lines += ["", f"## {args.folder} minus {args.versus}, same setting and seed", "",
                  *device_differences(groups, read_groups(args.versus))]
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out:
        args.out.write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
