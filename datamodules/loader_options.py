"""DataLoader keyword arguments from a datamodule's worker and memory settings (run.py picks them per device:
lightning_modules/shared/device_defaults.py)."""
from __future__ import annotations


def loader_options(num_workers: int | None, pin_memory: bool = False, persistent_workers: bool = False,
                   prefetch_factor: int | None = None) -> dict:
    """``num_workers`` (None: 0), ``pin_memory``, and, with workers only (DataLoader refuses them without),
    ``persistent_workers`` and ``prefetch_factor``."""
    workers = int(num_workers or 0)
    options = {"num_workers": workers, "pin_memory": bool(pin_memory)}
    if workers > 0:
        options["persistent_workers"] = bool(persistent_workers)
        if prefetch_factor:
            options["prefetch_factor"] = int(prefetch_factor)
    return options
