"""End-of-run report: cluster descriptions and pictures of what the clustering evaluation found."""
from __future__ import annotations

import logging
import shutil
import time
from pathlib import Path

import numpy as np
from lightning.pytorch.callbacks import Callback

from callbacks.evaluation.clustering_eval import ClusteringEvaluator
from callbacks.evaluation.clustering_predictions import run_predictions
from evaluation.model_io import run_files
from lightning_modules.shared.eval_outputs import cached_eval_outputs
from textcore.errors import ConfigError

log = logging.getLogger(__name__)


class RunReport(Callback):
    """Writes, into ``output_dir``, what a person needs to look at and reuse a run's clusters.

    Clustering runs (a ``ClusteringEvaluator`` among the callbacks):

    - at train start, ``embeddings/before.npy``: the evaluation embeddings before the first step
      (float16; the evaluation pass the evaluator makes anyway, shared through ``cached_eval_outputs``).
      A resumed run copies the file of the run it resumes from;
    - at the end, ``clusters.md`` and ``clusters.json`` (``evaluation.run_report.describe``) of the files the
      prediction writer (``callbacks.evaluation.clustering_predictions``) wrote: predictions.csv and
      ``embeddings/after.npy``.

    Every run, when ``html`` is true: ``report.html`` (``evaluation.run_report.html``: the map of at most
    ``html_max_points`` texts, default ``max_points``, the clusters, the summary and the curves in one
    offline page; the summary comes from the other callbacks' ``summary()``, what results.json will hold).

    Every run, when ``plots`` is true: ``plots/*.png`` (``evaluation.run_report.plots``: embedding maps and the
    matched confusion matrix for clustering runs, training curves from the CSV logger's
    ``metrics.csv``, a CSV logger being added beside W&B / TensorBoard when the run has none), also
    logged as images to the W&B and TensorBoard loggers.

    The work happens in ``on_fit_end``, after every callback's ``on_train_end`` (final
    evaluations, predictions.csv, the final embeddings) and before the loggers are finalised. A failure while describing
    or plotting is logged as a warning and recorded under ``report.errors`` in results.json: the
    run's results are never lost for a picture. Needs nothing on the module beyond what the
    clustering evaluator needs (``eval_step``).
    """

    results_key = "report"

    def __init__(self, output_dir: str | None = None, describe: bool = True, plots: bool = True,
                 projection: str = "tsne", max_points: int = 3000, seed: int = 0, top_words: int = 10,
                 representatives: int = 3, tokenizer: str = "auto", html: bool = True,
                 html_max_points: int | None = None):
        from evaluation.run_report.ctfidf import resolve_tokenizer
        from evaluation.run_report.plots import PROJECTIONS

        if tokenizer != "backbone":
            resolve_tokenizer(tokenizer, [])  # a malformed setting fails before training

        if projection not in PROJECTIONS:
            raise ConfigError(f"callbacks.report.projection must be one of {PROJECTIONS}, got '{projection}'")
        if max_points < 0 or top_words < 1 or representatives < 0:
            raise ConfigError("callbacks.report: max_points >= 0 (0: all), top_words >= 1, representatives >= 0")
        if html_max_points is not None and html_max_points < 0:
            raise ConfigError(f"callbacks.report.html_max_points must be >= 0 (0: all) or null (max_points), "
                              f"got {html_max_points}")
        self.output_dir = Path(output_dir) if output_dir else None
        self.describe = describe
        self.plots = plots
        self.projection = projection
        self.max_points = max_points
        self.seed = seed
        self.top_words = top_words
        self.representatives = representatives
        self.tokenizer = tokenizer
        self.html = html
        self.html_max_points = max_points if html_max_points is None else html_max_points
        self._report: dict | None = None  # the cluster descriptions, for the page
        self._predictions = None  # predictions.csv's content, as written (run_files.RunPredictions)
        self.before_path: str | None = None  # where this run's "before" embeddings are (kept in checkpoints)
        self.files: list[str] = []
        self.errors: list[str] = []
        self.seconds: float | None = None

    def state_dict(self) -> dict:
        return {"before_path": self.before_path}

    def load_state_dict(self, state_dict: dict) -> None:
        self.before_path = state_dict.get("before_path")

    # -- hooks ------------------------------------------------------------------------------------------------
    def setup(self, trainer, pl_module, stage: str) -> None:
        """With W&B or TensorBoard but no CSV logger, add one (``<run>/csv/metrics.csv``): the training
        curves are drawn from it. ``logger=none`` stays without any logger (and without curves)."""
        from lightning.pytorch.loggers import CSVLogger

        loggers = list(trainer.loggers)
        if self.plots and self.output_dir is not None and loggers and not any(
                isinstance(lg, CSVLogger) for lg in loggers):
            trainer.loggers = loggers + [CSVLogger(save_dir=str(self.output_dir), name="csv", version="")]

    def on_train_start(self, trainer, pl_module) -> None:
        evaluator = _evaluator(trainer)
        # without the evaluator's "before" pass, the embeddings would cost a pass of their own
        if self.output_dir is None or evaluator is None or not evaluator.evaluate_before:
            return
        target = self.output_dir / run_files.EMBEDDINGS_BEFORE
        if trainer.global_step == 0:
            rows = evaluator.sample_rows(len(trainer.datamodule.texts))  # the evaluator's texts and its pass
            # on every rank: under DDP the pass is made by all the processes together (each embeds its share)
            embeddings = cached_eval_outputs(trainer, pl_module, rows)["embeddings"]
            if not trainer.is_global_zero:
                return
            run_files.save_embeddings(target, embeddings.numpy())
            rows_file = self.output_dir / run_files.EMBEDDINGS_BEFORE_ROWS
            if rows is not None:
                np.save(rows_file, rows.astype(np.int64))
            elif rows_file.is_file():  # from an earlier run in this folder
                rows_file.unlink()
            self.before_path = str(target)
            return
        if not trainer.is_global_zero:
            return
        source = self._resumed_before(trainer)
        if source is not None and source.resolve() != target.resolve():
            target.parent.mkdir(parents=True, exist_ok=True)
            for name in (run_files.EMBEDDINGS_BEFORE, run_files.BEFORE_KMEANS, run_files.EMBEDDINGS_BEFORE_ROWS):
                if (source.parent.parent / name).is_file():
                    shutil.copyfile(source.parent.parent / name, self.output_dir / name)
            self.before_path = str(target)

    def on_fit_end(self, trainer, pl_module) -> None:
        if self.output_dir is None or not trainer.is_global_zero:
            return
        start = time.perf_counter()
        evaluator = _evaluator(trainer)
        if self.describe or self.plots or self.html:  # tens of seconds with maps of thousands of texts
            log.info("end-of-run report: %s", ", ".join(
                name for name, on in (("clusters.md", self.describe), (f"plots ({self.projection} maps)", self.plots),
                                      ("report.html", self.html)) if on))
        embeddings = self._predictions = None
        if evaluator is not None and evaluator.outputs is not None:
            # the saved file (float16), not the pass: the CLIs then redo exactly the same descriptions and maps
            embeddings = run_files.load_array(self.output_dir, run_files.EMBEDDINGS_AFTER)
            self._predictions = run_predictions(trainer.datamodule, evaluator.predictions)  # predictions.csv's
        if self.describe and embeddings is not None and (self.output_dir / run_files.PREDICTIONS).is_file():
            self._guard("cluster descriptions", self._describe, embeddings)
        if self.plots or self.html:
            _flush_csv_loggers(trainer)
        if self.plots:
            self._guard("plots", self._plot, trainer, embeddings)
        if self.html:
            self._guard("report page", self._page, trainer, embeddings)
        self.seconds = round(time.perf_counter() - start, 2)

    def summary(self) -> dict:
        return {"files": self.files, "errors": self.errors, "seconds": self.seconds}

    # -- work ---------------------------------------------------------------------------------------------------
    def _describe(self, embeddings: np.ndarray) -> None:
        from evaluation.run_report.describe import describe_run

        self._report = describe_run(self.output_dir, self.top_words, self.representatives, embeddings=embeddings,
                                    tokenizer=self.tokenizer, predictions=self._predictions)
        self.files += [run_files.CLUSTERS_MD, run_files.CLUSTERS_JSON]
        log.info("cluster descriptions: %s", self.output_dir / run_files.CLUSTERS_MD)

    def _plot(self, trainer, embeddings) -> None:
        from evaluation.run_report.plots import make_plots

        try:
            paths = make_plots(self.output_dir, self.projection, self.max_points, self.seed, embeddings=embeddings,
                               predictions=self._predictions)
        except run_files.RunFolderError as err:  # e.g. logger=none on an STS run: nothing to draw
            log.info("no plots: %s", err)
            return
        self.files += [str(p.relative_to(self.output_dir)) for p in paths]
        log.info("plots: %s", ", ".join(str(p) for p in paths))
        log_images(trainer.loggers, paths, trainer.global_step)

    def _page(self, trainer, embeddings) -> None:
        from evaluation.run_report.describe import cluster_report
        from evaluation.run_report.html import write_run_page

        clustered = embeddings is not None and (self.output_dir / run_files.PREDICTIONS).is_file()
        if not clustered and not (self.output_dir / run_files.METRICS_CSV).is_file():
            return
        report = self._report
        if clustered and report is None:  # describe=false: described for the page only, no clusters.md
            report = cluster_report(self.output_dir, self.top_words, self.representatives, embeddings,
                                    self.tokenizer, self._predictions)
        # results.json is written after fit from these same summaries (run.train)
        results = {getattr(cb, "results_key", type(cb).__name__): cb.summary() for cb in trainer.callbacks
                   if hasattr(cb, "summary") and cb is not self}
        path = write_run_page(self.output_dir, report if clustered else None, embeddings if clustered else None,
                              results, self.projection, self.html_max_points, self.seed,
                              self._predictions if clustered else None)
        self.files.append(str(path.relative_to(self.output_dir)))
        log.info("report page: %s", path)

    def _guard(self, what: str, fn, *args) -> None:
        try:
            fn(*args)
        except Exception as err:  # noqa: BLE001 - a picture must not cost the run its results.json
            message = f"{what} failed: {type(err).__name__}: {err}"
            self.errors.append(message)
            hint = {"plots": "plots {}", "report page": "describe {} --html"}.get(what, "describe {}")
            log.warning("%s (the run's results are kept; rerun with python tools.py %s)", message,
                        hint.format(self.output_dir))

    def _resumed_before(self, trainer) -> Path | None:
        candidates = [Path(self.before_path)] if self.before_path else []
        ckpt = getattr(trainer, "ckpt_path", None)
        if ckpt:
            candidates.append(Path(ckpt).resolve().parent.parent / run_files.EMBEDDINGS_BEFORE)
        return next((c for c in candidates if c.is_file()), None)


def _evaluator(trainer) -> ClusteringEvaluator | None:
    return next((cb for cb in trainer.callbacks if isinstance(cb, ClusteringEvaluator)), None)


def _flush_csv_loggers(trainer) -> None:
    """Write what the CSV logger still buffers, so metrics.csv holds the last steps."""
    from lightning.pytorch.loggers import CSVLogger

    for logger in trainer.loggers:
        if isinstance(logger, CSVLogger):
            logger.save()


def log_images(loggers, paths, step: int) -> None:
    """Log PNG files as images: ``plots/<name>`` in W&B and TensorBoard; other loggers are skipped."""
    from lightning.pytorch.loggers import TensorBoardLogger, WandbLogger

    if not paths:
        return
    for logger in loggers:
        if isinstance(logger, WandbLogger):
            for path in paths:
                logger.log_image(key=f"plots/{Path(path).stem}", images=[str(path)], step=step)
        elif isinstance(logger, TensorBoardLogger):
            from matplotlib.image import imread

            for path in paths:
                image = imread(str(path))[..., :3]  # [H, W, 3] floats in [0, 1]
                logger.experiment.add_image(f"plots/{Path(path).stem}", image, step, dataformats="HWC")
            logger.experiment.flush()
