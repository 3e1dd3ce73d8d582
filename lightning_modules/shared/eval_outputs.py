"""Run a module's ``eval_step`` over a datamodule's ordered evaluation loader, once per optimizer step.

Here, below the callbacks, because the methods' own callbacks (SCCL's centroid initialisation, AECL's stage
switch) share this pass with the clustering evaluator and the run report."""
from __future__ import annotations

import torch


def collect_eval_outputs(pl_module, dataloader) -> dict[str, torch.Tensor]:
    """Concatenate ``pl_module.eval_step(batch)`` outputs over ``dataloader``, in row order.

    Batches must carry an ``index`` tensor of row positions (the loader may reorder rows, e.g.
    to group texts of similar length); outputs come back indexed by row. The module is put in
    eval mode for the pass and restored afterwards.
    """
    was_training = pl_module.training
    pl_module.eval()
    parts: dict[str, list[torch.Tensor]] = {}
    indices = []
    try:
        with torch.no_grad():
            for batch in dataloader:
                batch = _to_device(batch, pl_module.device)
                for key, value in pl_module.eval_step(batch).items():
                    parts.setdefault(key, []).append(value.detach().float().cpu())
                indices.append(batch["index"].cpu())
    finally:
        pl_module.train(was_training)
    order = torch.cat(indices)
    outputs = {}
    for key, values in parts.items():
        stacked = torch.cat(values)
        restored = torch.empty_like(stacked)
        restored[order] = stacked
        outputs[key] = restored
    return outputs


def cached_eval_outputs(trainer, pl_module) -> dict[str, torch.Tensor]:
    """Evaluation outputs for the current step, computed once even if several callbacks ask.

    Keyed by the trainer and its optimizer step (not the epoch): the weights change only with the
    step, so the evaluator at the end of an epoch, AECL's stage switch at the start of the next and
    the end-of-training callbacks (where Lightning may already count the next epoch) share one
    encoder pass.
    """
    key = (id(trainer), trainer.global_step)
    cache = getattr(pl_module, "_eval_outputs_cache", None)
    if cache is None or cache[0] != key:
        # the global RNG is left as it was (creating the loader's iterator draws from it): whether the
        # outputs come from the cache must not change the dropout masks that follow (exact resume)
        with torch.random.fork_rng(devices=[]):
            dataloader = trainer.datamodule.eval_dataloader()
            pl_module._eval_outputs_cache = (key, collect_eval_outputs(pl_module, dataloader))
    return pl_module._eval_outputs_cache[1]


def _to_device(batch, device):
    if isinstance(batch, torch.Tensor):
        return batch.to(device)
    if isinstance(batch, dict):
        return {k: _to_device(v, device) for k, v in batch.items()}
    return batch
