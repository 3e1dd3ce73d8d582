"""Run a module's ``eval_step`` over a datamodule's ordered evaluation loader, once per optimizer step.

Here, below the callbacks, because the methods' own callbacks (SCCL's centroid initialisation, AECL's stage
switch) share this pass with the clustering evaluator and the run report."""
from __future__ import annotations

import logging
import os
import tempfile
from pathlib import Path

import numpy as np
import torch

from textcore.console import PhaseProgress

log = logging.getLogger(__name__)

# an output larger than this share of the memory still available goes to a memory-mapped file
SPILL_SHARE = 0.25


class EvalOutputs(dict):
    """``{name: tensor [n, ...]}`` of one evaluation pass, in the order of the rows it embedded, and ``batches``:
    the batches of positions the pass ran, in its order (a head whose prediction depends on the other texts of
    its batch, AECL's, is diagnosed on them)."""

    batches: object = None
    kmeans: dict | None = None  # settings -> KMeansResult of ``embeddings`` (outputs_kmeans)
    backend: str = "torch"  # what embedded the texts: torch, or an export's backend (``embedder`` of the pass)


def outputs_kmeans(outputs: EvalOutputs, num_clusters: int, seed: int, n_init: int, backend: str, sample: int,
                   space=None, **options):
    """KMeans of the pass's embeddings in the clustering space ``space`` (``textcore.cluster_space.SpaceSettings``;
    None: the embeddings), made once per setting: the evaluation before training and SCCL's centroid
    initialisation ask for the same KMeans (10 restarts, and the same UMAP) of the same pass."""
    from textcore.cluster_space import EMBEDDINGS, space_kmeans

    space = space or EMBEDDINGS
    key = (num_clusters, seed, n_init, backend, sample, space, tuple(sorted(options.items())))
    if outputs.kmeans is None:
        outputs.kmeans = {}
    if key not in outputs.kmeans:
        outputs.kmeans[key] = space_kmeans(outputs["embeddings"].numpy(), num_clusters, seed, n_init, backend,
                                           sample, space, **options)
    return outputs.kmeans[key]


def collect_eval_outputs(pl_module, dataloader, spill_dir: str | Path | None = None, strategy=None,
                         embedder=None) -> EvalOutputs:
    """Run ``pl_module.eval_step(batch)`` over ``dataloader`` and put each output row at its position.

    Batches must carry an ``index`` tensor of positions (the loader may reorder rows, e.g. to group texts of
    similar length); outputs come back by position, as float32 tensors [n, ...]. Each output is written into one
    array as the batches arrive (no list of parts, no second copy); an array larger than ``SPILL_SHARE`` of the
    available memory is a memory-mapped file in ``spill_dir`` (the system's temporary folder when None), unlinked
    at once so nothing is left behind. The module is put in eval mode for the pass and restored afterwards.

    With a ``strategy`` of several processes (DDP), every process must call this together: each embeds every
    ``world_size``-th batch (batch ``b`` on rank ``b % world_size``: the length-sorted batches shared evenly), and
    the rows are then summed across the processes (each row is another process's zeros, so the sum is exact), so
    every process holds every row and each text went through the encoder once. The batches are those of one
    process, so the outputs equal one process's.

    ``embedder``: embeds the token batches in place of the module's encoder for this pass (``pass_embedder`` of the
    module: an ``OnnxEncoder``, ``textcore.encoding.onnx_runtime``); the heads still run in torch.
    """
    world = getattr(strategy, "world_size", 1) if strategy is not None else 1
    rank = strategy.global_rank if world > 1 else 0
    was_training = pl_module.training
    pl_module.eval()
    dataset = getattr(dataloader, "dataset", None)
    # a DataLoader knows its rows; a list of batches (tests, benchmarks) is counted
    total = len(dataset) if dataset is not None else sum(len(b["index"]) for b in dataloader)
    mine = rank_batches(dataloader, rank, world) if world > 1 else dataloader
    arrays: dict[str, np.ndarray] = {}
    pl_module.pass_embedder = embedder
    try:
        tokens = getattr(getattr(mine, "batch_sampler", None), "tokens", None)  # the ETA by tokens left
        rows = _rows_of(mine) if world > 1 else total
        with torch.no_grad(), PhaseProgress("embedding", rows, "texts", logger=log, total_work=tokens) as progress:
            for batch in mine:
                positions = batch["index"].numpy()
                counts = (batch.get("original") or {}).get("token_counts") if isinstance(batch, dict) else None
                batch = _to_device(batch, pl_module.device)
                for key, value in pl_module.eval_step(batch).items():
                    value = value.detach().float().cpu().numpy()
                    if key not in arrays:
                        arrays[key] = _allocate((total, *value.shape[1:]), spill_dir, zeros=world > 1)
                    arrays[key][positions] = value
                progress.advance(len(positions), sum(counts) if counts and tokens else None)
    finally:
        pl_module.pass_embedder = None
        pl_module.train(was_training)
    if world > 1:
        arrays = _summed_across_ranks(arrays, total, strategy, pl_module.device, spill_dir)
    outputs = EvalOutputs({key: torch.from_numpy(array) for key, array in arrays.items()})
    outputs.batches = getattr(dataloader, "batch_sampler", None)
    outputs.backend = getattr(embedder, "backend", "torch")
    return outputs


def rank_batches(dataloader, rank: int, world: int):
    """The batches of ``dataloader`` that rank ``rank`` of ``world`` embeds: every ``world``-th, from the ``rank``-th
    (a loader with a batch sampler gets a loader of those batches; a list of batches, a list)."""
    sampler = getattr(dataloader, "batch_sampler", None)
    if sampler is None:
        return list(dataloader)[rank::world]
    from torch.utils.data import DataLoader

    chosen = [sampler[b] for b in range(rank, len(sampler), world)]
    return DataLoader(dataloader.dataset, batch_sampler=chosen, num_workers=dataloader.num_workers,
                      pin_memory=dataloader.pin_memory, collate_fn=dataloader.collate_fn)


def _rows_of(batches) -> int:
    sampler = getattr(batches, "batch_sampler", None)
    return sum(len(b) for b in sampler) if sampler is not None else sum(len(b["index"]) for b in batches)


GATHER_BLOCK_BYTES = 64 << 20  # rows summed across the processes at a time: the device holds one block


def _summed_across_ranks(arrays: dict, total: int, strategy, device, spill_dir) -> dict:
    """Every process's rows in every process's arrays: a sum of the processes' arrays, each zero where another
    process embedded. Rank 0, which embedded the first batch, names the outputs and their shapes."""
    shapes = strategy.broadcast({key: array.shape[1:] for key, array in arrays.items()}, src=0)
    for key, shape in shapes.items():
        if key not in arrays:  # a process with no batch (fewer batches than processes)
            arrays[key] = _allocate((total, *shape), spill_dir, zeros=True)
    for key in shapes:
        array = arrays[key]
        step = max(1, GATHER_BLOCK_BYTES // max(1, array[:1].nbytes))
        for start in range(0, total, step):
            block = torch.from_numpy(np.ascontiguousarray(array[start:start + step])).to(device)
            array[start:start + step] = strategy.reduce(block, reduce_op="sum").cpu().numpy()
    return arrays


def _allocate(shape: tuple, spill_dir, zeros: bool = False) -> np.ndarray:
    """A float32 array of ``shape`` (of zeros with ``zeros``; a new mapped file is zeros anyway): in memory, or a
    memory-mapped file when it would take more than ``SPILL_SHARE`` of the memory available (a million 384-d
    embeddings are 1.5 GB)."""
    size = int(np.prod(shape)) * 4
    available = available_memory()
    if available is None or size <= SPILL_SHARE * available:
        return np.zeros(shape, dtype=np.float32) if zeros else np.empty(shape, dtype=np.float32)
    folder = Path(spill_dir) if spill_dir is not None else Path(tempfile.gettempdir())
    folder.mkdir(parents=True, exist_ok=True)
    handle, name = tempfile.mkstemp(prefix=".eval-outputs-", suffix=".f32", dir=folder)
    os.close(handle)
    log.info("evaluation outputs of %s floats (%.1f GB) kept in a memory-mapped file in %s: more than %d %% of "
             "the %.1f GB of memory available", f"{int(np.prod(shape)):,}", size / 1e9, folder,
             100 * SPILL_SHARE, available / 1e9)
    array = np.memmap(name, dtype=np.float32, mode="w+", shape=shape)
    try:
        os.unlink(name)  # the mapping keeps the space until it is dropped; a crash leaves no file
    except OSError:
        pass
    return array


def available_memory() -> int | None:
    """Bytes of memory the system can still give (Linux ``MemAvailable``), or None when it does not say."""
    try:
        with open("/proc/meminfo") as handle:
            for line in handle:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return None


def cached_eval_outputs(trainer, pl_module, rows: np.ndarray | None = None, embedder=None) -> EvalOutputs:
    """Evaluation outputs of ``rows`` (sorted corpus rows; every row when None) for the current step, computed once
    even if several callbacks ask.

    Keyed by the trainer, its optimizer step (not the epoch) and the rows: the weights change only with the
    step, so the evaluator at the end of an epoch, AECL's stage switch at the start of the next and
    the end-of-training callbacks (where Lightning may already count the next epoch) share one
    encoder pass. An output too large for memory is mapped into ``pl_module._eval_spill_dir`` when a callback set
    one (the clustering evaluator: ``<run>/embeddings``), else into the system's temporary folder.

    ``embedder``: the pass is made with it (``collect_eval_outputs``), and a cached pass made otherwise is not
    reused; without one, the cached pass of this step is taken whatever embedded it (the callbacks after the
    end-of-run evaluation share its pass, an export's when the run asked for one).
    """
    key = (id(trainer), trainer.global_step, _rows_key(rows))
    cache = getattr(pl_module, "_eval_outputs_cache", None)
    wanted = getattr(embedder, "backend", None)
    if cache is None or cache[0] != key or (wanted is not None and cache[1].backend != wanted):
        pl_module._eval_outputs_cache = None  # the last pass's arrays can go before the next is made
        # the global RNG is left as it was (creating the loader's iterator draws from it): whether the
        # outputs come from the cache must not change the dropout masks that follow (exact resume)
        with torch.random.fork_rng(devices=[]):
            datamodule = trainer.datamodule
            dataloader = datamodule.eval_dataloader() if rows is None else datamodule.eval_dataloader(rows=rows)
            outputs = collect_eval_outputs(pl_module, dataloader, getattr(pl_module, "_eval_spill_dir", None),
                                           getattr(trainer, "strategy", None), embedder)
        pl_module._eval_outputs_cache = (key, outputs)
    return pl_module._eval_outputs_cache[1]


def _rows_key(rows: np.ndarray | None):
    if rows is None:
        return None
    rows = np.asarray(rows)
    return (len(rows), hash(rows.tobytes()))


def _to_device(batch, device):
    if isinstance(batch, torch.Tensor):
        return batch.to(device)
    if isinstance(batch, dict):
        return {k: _to_device(v, device) for k, v in batch.items()}
    return batch
