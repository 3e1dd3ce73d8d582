"""GPU out of memory during a run: one message naming the settings that decide what a step holds, with their
values in effect (docs/reliability.md "Faults of many processes"; the run's lifecycle turns the error into
it).

torch's own message says how many bytes were missing, not which setting of this project to change. What a
training step holds on the GPU grows with ``batch_size`` (texts per step and process), the width of one encoder
call (``encoder_chunk_tokens``), whether the step's encoder graph is held whole or one mini-batch at a time
(``encoder_grad_cache_tokens``: cached gradients), and the activations' precision (``trainer.precision``).
"""
from __future__ import annotations

from omegaconf import DictConfig

from textcore.errors import UserError

_DEVICES = ("CUDA", "HIP", "MPS", "XPU")
_FULL_PRECISION = ("32", "32-true", "64", "64-true", "None")


class OutOfMemoryError(UserError):
    """The GPU ran out of memory; the message names the settings to lower and the checkpoint that is kept."""


def is_out_of_memory(err: BaseException | None) -> BaseException | None:
    """The GPU out-of-memory error in ``err``'s chain (torch's ``OutOfMemoryError``, or the RuntimeError with
    "CUDA out of memory" / "CUDA error: out of memory" that some kernels and older versions raise), or None."""
    import torch

    seen = set()
    while err is not None and id(err) not in seen:
        seen.add(id(err))
        if isinstance(err, torch.OutOfMemoryError):
            return err
        text = str(err)
        if isinstance(err, RuntimeError) and "out of memory" in text and any(d in text for d in _DEVICES):
            return err
        err = err.__cause__ or err.__context__
    return None


def _smaller(value, example: int) -> str:
    if isinstance(value, int) and value > 0:
        return f"e.g. {max(1, value // 2)}"
    return f"e.g. {example}"


def levers(cfg: DictConfig, precision: str | None = None) -> str:
    """The four settings with their values in effect (``precision``: the Trainer's, where the config leaves it to
    Lightning) and the direction that needs less memory."""
    batch = cfg.get("batch_size")
    chunk = cfg.get("encoder_chunk_tokens")
    cache = cfg.get("encoder_grad_cache_tokens") or 0
    precision = str(precision or (cfg.get("trainer") or {}).get("precision") or "32-true")
    chunk_hint = "one call per batch: set a width, e.g. 4096" if chunk == 0 else \
        f"padded tokens per encoder call; {_smaller(chunk, 4096)}, the same results"
    cache_hint = ("off: e.g. encoder_grad_cache_tokens=4096 gives the same gradients while holding one mini-batch's "
                  "encoder graph at a time, docs/cached_gradients.md") if not cache else \
        f"cached gradients on; {_smaller(cache, 2048)}"
    precision_hint = "e.g. bf16-mixed, or 16-mixed on GPUs without bf16: about half the activation memory" \
        if precision in _FULL_PRECISION else "already below float32"
    return (f"batch_size={batch} (texts per step and process; fewer also means fewer in-batch negatives, so the method "
            f"changes), encoder_chunk_tokens={chunk} ({chunk_hint}), encoder_grad_cache_tokens={cache} "
            f"({cache_hint}), trainer.precision={precision} ({precision_hint})")


def out_of_memory_error(err: BaseException, cfg: DictConfig, where: str, kept: str,
                        precision: str | None = None) -> OutOfMemoryError:
    """The one line for ``err``, raised ``where`` (e.g. "at training step 3"); ``kept`` says which checkpoint
    holds the training so far and how to resume; ``precision`` as for :func:`levers`."""
    first = (str(err).strip().splitlines() or [type(err).__name__])[0]
    first = first if len(first) <= 240 else first[:237] + "..."
    return OutOfMemoryError(f"the GPU ran out of memory {where} ({first}). What a step holds is set by "
                            f"{levers(cfg, precision)}. {kept}")
