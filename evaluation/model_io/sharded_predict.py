"""``python tools.py predict`` as ``Trainer.predict``: the corpus's shards shared among every process of every node.

Lightning's own machinery does the distribution: the DDP strategy starts and connects the processes (one per device;
``srun`` under SLURM), the data module's ``prepare_data`` runs once (global rank 0: the input is cut into shards,
``evaluation.model_io.corpus_shards``), its ``setup`` gives each rank a contiguous block of the shards still to
encode (the list made by rank 0 and broadcast, so the ranks cannot disagree), and a ``BasePredictionWriter`` writes
each shard's part as soon as it is encoded. After a barrier rank 0 checks that every part exists, then writes the
summary and assembles an output file.

One batch is one shard: the encoder sorts its texts by length within it, and the rows of a shard are encoded
together whatever the number of processes, so every part is the same for 1, 2 or 8 processes (and for a resumed
prediction that uses another number of them).
"""
from __future__ import annotations

import json
import logging
import os
import time
from pathlib import Path

import lightning as L
import numpy as np
import torch
from lightning.pytorch.callbacks import BasePredictionWriter
from torch.utils.data import DataLoader, IterableDataset

from evaluation.model_io import corpus_shards as shards
from textcore.atomic_files import atomic_write_text

log = logging.getLogger(__name__)


NO_SHARD = -1  # the one item of a rank with no shard to encode


class ShardTexts(IterableDataset):
    """One item per shard of ``shards`` (this rank's): its number, first row, texts and blank mask.

    A rank without a shard (fewer shards left than processes) still gets one empty item: Lightning skips the predict
    loop of a rank whose loader is empty, hooks included, so that rank would never reach the barrier the others wait
    at."""

    def __init__(self, folder: Path, layout: shards.ShardLayout, mine: list[int]):
        self.folder, self.layout, self.mine = folder, layout, mine

    def __len__(self) -> int:
        return max(len(self.mine), 1)

    def __iter__(self):
        if not self.mine:
            yield {"shard": NO_SHARD, "start": 0, "texts": [], "blank": np.zeros(0, dtype=bool)}
        for shard in self.mine:
            texts, blank = shards.read_text_shard(self.folder, shard)
            yield {"shard": shard, "start": self.layout.bounds(shard)[0], "texts": texts, "blank": blank}


def _as_is(item):
    return item


class CorpusShards(L.LightningDataModule):
    """The input's shards for ``Trainer.predict``.

    ``chunks``: a callable giving the input's ``(first row, texts, blank)`` chunks (the project's reader);
    ``plan``: what the parts are of (``corpus_shards.check_plan``)."""

    def __init__(self, folder: Path, chunks, shard_rows: int, plan: dict):
        super().__init__()
        self.prepare_data_per_node = False  # one process of all writes the shards: the folder is shared
        self.folder, self.chunks, self.shard_rows, self.plan = Path(folder), chunks, shard_rows, plan
        self.layout: shards.ShardLayout | None = None
        self.mine: list[int] = []
        self.pending: list[int] = []

    def prepare_data(self) -> None:
        shards.check_plan(self.folder, self.plan)
        shards.remove_leftovers(self.folder)
        if shards.stored_layout(self.folder, self.plan["input"]) is None:
            log.info("cutting %s into shards of %s rows (once; a rerun reuses them)", self.plan["input"]["path"],
                     f"{self.shard_rows:,}")
        shards.split_texts(self.folder, self.chunks(), self.shard_rows, self.plan["input"])

    def setup(self, stage: str) -> None:
        trainer = self.trainer
        self.layout = shards.stored_layout(self.folder, self.plan["input"])
        pending = shards.pending_shards(self.folder, self.layout) if trainer.is_global_zero else None
        self.pending = trainer.strategy.broadcast(pending, src=0)  # one view of what is left, for every rank
        self.mine = shards.contiguous_block(self.pending, trainer.world_size, trainer.global_rank)
        if trainer.is_global_zero:
            done = self.layout.shards - len(self.pending)
            log.info("%s rows in %d shards of %s: %s%d to encode on %d process(es)", f"{self.layout.rows:,}",
                     self.layout.shards, f"{self.shard_rows:,}", f"{done} complete from an earlier run, " if done
                     else "", len(self.pending), trainer.world_size)

    def predict_dataloader(self) -> DataLoader:
        return DataLoader(ShardTexts(self.folder, self.layout, self.mine), batch_size=None, collate_fn=_as_is)


class ClusterPredictor(L.LightningModule):
    """A run's encoder with its head or its KMeans centres, assigning the texts of one shard per step.

    ``model``: ``evaluation.model_io.predict.ClusterModel``; ``assign(model, texts, blank, use_head=, context=,
    batch_size=)`` -> (cluster, confidence, margin, embeddings) of a shard's texts
    (``evaluation.model_io.predict.assign_texts``); ``make_context()``: the embeddings a head that reads other
    texts attends to (AECL), made on each process once the model is on its device (None: no such head);
    ``words``: cluster -> its top words."""

    def __init__(self, model, assign, make_context, use_head: bool, words: dict, batch_size: int, embeddings: bool):
        super().__init__()
        self.model, self.assign, self.make_context = model, assign, make_context
        # the weights Lightning moves to the device: the whole module (the head needs it), else the encoder
        self.network = model.module if model.module is not None else model.encoder
        self.use_head, self.words, self.batch_size, self.keep_embeddings = use_head, words, batch_size, embeddings
        self.context = None

    def on_predict_start(self) -> None:
        if self.make_context is not None:  # the same draw on every rank
            self.context = self.make_context().to(self.device)

    def predict_step(self, batch: dict, batch_idx: int) -> dict | None:
        if batch["shard"] == NO_SHARD:
            return None
        texts, blank = batch["texts"], batch["blank"]
        n = len(texts)
        out = {"row": batch["start"] + np.arange(n)}
        cluster, confidence, margin, embedded = self.assign(self.model, texts, blank, use_head=self.use_head,
                                                            context=self.context, batch_size=self.batch_size)
        confidence, margin = np.round(confidence, 6), np.round(margin, 6)
        if self.keep_embeddings:
            out["embedding"] = np.zeros((n, self.model.encoder.dim), dtype=np.float16)
            if embedded is not None:
                out["embedding"][~blank] = embedded.numpy().astype(np.float16)
        out.update(cluster=cluster, confidence=confidence, margin=margin,
                   top_words=[self.words.get(int(c), "") if c >= 0 else "" for c in cluster])
        return out


class PartWriter(BasePredictionWriter):
    """Writes each shard's part when its step ends; after the last one (every rank), rank 0 checks the parts, writes
    ``_complete.json`` and, for an output file, assembles it in row order and removes the parts.

    ``finish``: called on rank 0 with the summary once every part exists (assembly); its return is kept in
    ``result``."""

    def __init__(self, folder: Path, assigned_by: str, finish=None):
        super().__init__(write_interval="batch")
        self.folder, self.assigned_by, self.finish = Path(folder), assigned_by, finish
        self.result = None
        self.written: list[int] = []
        self._parent: int | None = None
        self._progress = None
        self._started = 0.0

    def setup(self, trainer, pl_module, stage: str) -> None:
        self._parent = os.getppid()

    def on_predict_start(self, trainer, pl_module) -> None:
        from textcore.console import PhaseProgress

        self._started = time.perf_counter()
        if trainer.is_global_zero:  # the other ranks advance alike
            datamodule = trainer.datamodule
            bounds = [datamodule.layout.bounds(s) for s in datamodule.mine]
            self._progress = PhaseProgress(f"predicting (rank 0 of {trainer.world_size})",
                                           sum(end - start for start, end in bounds), "texts",
                                           logger=log).__enter__()

    def write_on_batch_end(self, trainer, pl_module, prediction, batch_indices, batch, batch_idx,
                           dataloader_idx=0) -> None:
        if trainer.global_rank > 0 and os.getppid() != self._parent:
            # the process that started this one (rank 0 of a local launch) is gone: nobody will collect the parts
            log.error("rank %d: the launching process ended; stopping (rerun the command to resume)",
                      trainer.global_rank)
            os._exit(1)
        if batch["shard"] == NO_SHARD:
            return
        shards.write_part(self.folder, batch["shard"], prediction)
        self.written.append(batch["shard"])
        if self._progress is not None:
            self._progress.advance(len(batch["texts"]))

    def on_predict_end(self, trainer, pl_module) -> None:
        if self._progress is not None:
            self._progress.__exit__(None, None, None)
        trainer.strategy.barrier("every part written")
        seconds = time.perf_counter() - self._started
        peaks = trainer.strategy.all_gather(torch.tensor([peak_memory_bytes()], dtype=torch.float64,
                                                         device=pl_module.device))
        if not trainer.is_global_zero:
            return
        layout = trainer.datamodule.layout
        encoded = sum(end - start for start, end in (layout.bounds(s) for s in trainer.datamodule.pending))
        summary = shards.summarise(self.folder, layout, self.assigned_by)
        summary.update(processes=trainer.world_size, device=str(pl_module.device), encoded_rows=encoded,
                       seconds=round(seconds, 1), texts_per_second=round(encoded / max(seconds, 1e-9), 1),
                       peak_memory_gib=[round(float(b) / 2**30, 3) for b in peaks.reshape(-1).tolist()])
        atomic_write_text(self.folder / shards.COMPLETE, json.dumps(summary, indent=2))
        self.result = self.finish(summary) if self.finish is not None else summary


def peak_memory_bytes() -> int:
    """This process's peak resident memory so far (``getrusage``: KiB on Linux, bytes on macOS)."""
    import resource
    import sys

    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return int(peak if sys.platform == "darwin" else peak * 1024)


def predict_on_devices(model, input_chunks, folder: Path, plan: dict, shard_rows: int, *, assign, make_context,
                       use_head: bool, words: dict, batch_size: int, embeddings: bool, accelerator: str, devices,
                       num_nodes: int, finish=None):
    """Run the prediction of ``plan`` into ``folder`` on ``devices`` x ``num_nodes`` processes (``ClusterPredictor``
    for ``model``, ``assign``, ``make_context``); on rank 0 the result of ``finish(summary)`` (the summary when
    None), elsewhere None."""
    import warnings

    warnings.filterwarnings("ignore", message=".*infer the batch indices.*")  # one batch is one shard
    warnings.filterwarnings("ignore", message=".*does not have many workers.*")
    warnings.filterwarnings("ignore", message=".*Your `IterableDataset` has `__len__` defined.*")
    writer = PartWriter(folder, plan["assigned_by"], finish)
    trainer = L.Trainer(accelerator=accelerator, devices=devices, num_nodes=num_nodes, strategy="auto",
                        callbacks=[writer], use_distributed_sampler=False, logger=False, enable_checkpointing=False,
                        enable_progress_bar=False, enable_model_summary=False)
    module = ClusterPredictor(model, assign, make_context, use_head, words, batch_size, embeddings)
    data = CorpusShards(folder, input_chunks, shard_rows, plan)
    trainer.predict(module, datamodule=data, return_predictions=False)
    return writer.result if trainer.is_global_zero else None
