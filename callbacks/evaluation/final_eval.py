"""End-of-training evaluation of the trained encoder on clustering benchmarks, transfer or MTEB.

For methods trained on data that is not the evaluation data (PairSupCon on NLI): when training
ends, the module's encoder is evaluated with ``evaluation.benchmarks.evaluate_model.evaluate_encoder``
(the same code as ``python tools.py evaluate``, so the numbers are the CLI's) and
the results are written into the run directory as ``evaluation.md``/``evaluation.json``.
``summary()`` gives the headline numbers for results.json. STS at the end of training has one callback of its
own, ``callbacks.evaluation.sts_eval.FinalStsEvaluation`` (sts.md/sts.json, best or final weights, STS-B dev);
this one refuses the ``sts`` task.
"""

from __future__ import annotations

import datetime as dt
import time
from pathlib import Path
from typing import Sequence

from lightning.pytorch.callbacks import Callback

from evaluation.benchmarks.clustering_tasks import BENCHMARKS
from evaluation.benchmarks.encoder_evaluation import evaluate_encoder, headline_rows, write_outputs
from textcore import run_folder
from textcore.errors import ConfigError


class FinalEvaluation(Callback):
    """Evaluates ``pl_module.encoder`` with ``pl_module.eval_pooling`` once, at the end of training.

    Args:
        tasks: subset of ``clustering``, ``transfer``, ``mteb`` (not ``sts``: method.callbacks.sts_eval).
        senteval_dir: SentEval's ``downstream`` folder (the transfer data).
        short_text_dir: folder of the clustering benchmark CSVs.
        clustering_datasets: conf/dataset names to cluster (default: the eight benchmarks;
            absent files are skipped with a note).
        seeds: KMeans seeds 0..seeds-1 per clustering dataset (PairSupCon: 10).
        kmeans_backend: the KMeans of the clustering task (the run's ``kmeans_backend``); needed with that task.
        transfer_options: keyword arguments for ``evaluation.benchmarks.transfer.evaluate_transfer``, e.g.
            ``{protocol: senteval, setting: default}`` (SentEval's PyTorch logistic regression, the
            papers' protocol and the default) or ``{protocol: sklearn}``; checked here, before training.
        output_dir: run directory for the Markdown/JSON files (none written when null); MTEB's own
            result files go to its ``mteb/`` sub-folder.
        mteb_tasks: with task ``mteb``: MTEB task names or local tables (``evaluation.benchmarks.mteb_eval``);
            checked here, before training (an unknown name, or a Hub task offline, stops the run).
        mteb_max_length: MTEB's token limit (default: the run's ``encoder.max_length``).
        clustering_max_length: token limit of the clustering embeddings (32, the papers' training length;
            PairSupCon's evaluation code: 64).
        results_key: the results.json section (and file stem, ``<results_key>.md``) of this evaluation,
            so that two instances (PairSupCon's and the generic ``callbacks.mteb``) do not collide.
    """

    results_key = "final_evaluation"

    def __init__(
        self,
        tasks: Sequence[str] = ("clustering",),
        senteval_dir: str | None = None,
        short_text_dir: str | None = None,
        clustering_datasets: Sequence[str] | None = None,
        seeds: int = 10,
        transfer_options: dict | None = None,
        output_dir: str | None = None,
        batch_size: int = 128,
        print_table: bool = True,
        kmeans_backend: str | None = None,
        mteb_tasks: Sequence[str] = (),
        mteb_max_length: int | None = None,
        results_key: str = "final_evaluation",
        clustering_max_length: int = 32,
    ):
        from textcore.kmeans import check_kmeans_backend

        # only the clustering task runs KMeans (the generic MTEB entry of conf/callbacks names no backend)
        self.kmeans_backend = check_kmeans_backend(kmeans_backend) if "clustering" in tasks else None
        self.results_key = results_key
        self.clustering_max_length = clustering_max_length
        if "sts" in tasks:
            raise ConfigError("FinalEvaluation: STS at the end of training is method.callbacks.sts_eval "
                              "(callbacks.evaluation.sts_eval.FinalStsEvaluation); remove sts from tasks")
        self.tasks = list(tasks)
        if "mteb" in self.tasks and not mteb_tasks:
            self.tasks.remove("mteb")  # the generic entry of conf/callbacks: off until tasks are named
        self.senteval_dir = senteval_dir
        self.short_text_dir = short_text_dir
        self.clustering_datasets = list(clustering_datasets) if clustering_datasets else list(BENCHMARKS)
        self.seeds = seeds
        self.transfer_options = dict(transfer_options or {})
        if "transfer" in self.tasks:
            from evaluation.benchmarks.transfer import check_transfer_options

            check_transfer_options(self.transfer_options)  # a bad option fails now, not after training
        self.mteb_tasks = list(mteb_tasks or ())
        self.mteb_max_length = mteb_max_length
        if "mteb" in self.tasks:
            from evaluation.benchmarks.mteb_eval import check_data_available, resolve_tasks

            check_data_available(resolve_tasks(self.mteb_tasks))
        self.output_dir = Path(output_dir) if output_dir else None
        self.batch_size = batch_size
        self.print_table = print_table
        self.result: dict | None = None

    def on_train_end(self, trainer, pl_module) -> None:
        if not trainer.is_global_zero or not self.tasks:
            return
        start = time.perf_counter()
        kwargs = {}
        if self.senteval_dir:
            kwargs["senteval_dir"] = self.senteval_dir
        if self.short_text_dir:
            kwargs["short_text_dir"] = self.short_text_dir
        label = f"{type(pl_module).__name__} step {trainer.global_step}"
        mteb_options = {"tasks": self.mteb_tasks, "max_length": self.mteb_max_length, "label": type(pl_module).__name__,
                        "out_dir": (self.output_dir or Path("outputs/evaluation")) / "mteb"}
        self.result = evaluate_encoder(
            pl_module.encoder,
            pl_module.eval_pooling,
            self.tasks,
            seeds=self.seeds,
            clustering_names=self.clustering_datasets,
            transfer_options=self.transfer_options,
            batch_size=self.batch_size,
            kmeans_backend=self.kmeans_backend,
            mteb_options=mteb_options,
            clustering_max_length=self.clustering_max_length,
            **kwargs,
        )
        self.result.update(step=trainer.global_step, date=dt.date.today().isoformat(),
                           wall_seconds=round(time.perf_counter() - start, 1))
        if self.output_dir is not None:
            stem = Path(run_folder.EVALUATION).stem if self.results_key == "final_evaluation" else self.results_key
            md_path, _ = write_outputs(self.result, self.output_dir, stem, label)
            if self.print_table:
                print(md_path.read_text())

    def summary(self) -> dict | None:
        """Headline numbers (x100) by name, plus the notes; the full result is in evaluation.json."""
        if self.result is None:
            return None
        return {"step": self.result["step"], "headline": headline_rows(self.result), "notes": self.result["notes"]}
