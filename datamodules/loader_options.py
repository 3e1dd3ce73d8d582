"""A training DataLoader's worker and memory settings (conf/config.yaml ``loader``; a training run chooses those left
null for its device: textcore/device_settings.py). A datamodule takes them from its dataset config (``loader:
${loader}``); one built outside a training run is given all four."""
from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Mapping

from textcore.errors import ConfigError


@dataclass(frozen=True)
class LoaderSettings:
    """``num_workers`` processes tokenise the batches (0: the training process), ``pin_memory`` puts them in
    page-locked memory, ``persistent_workers`` keeps the workers between epochs, ``prefetch_factor`` batches
    are made ahead per worker (None: torch's default)."""

    num_workers: int
    pin_memory: bool
    persistent_workers: bool
    prefetch_factor: int | None

    @classmethod
    def of(cls, loader: "LoaderSettings | Mapping") -> "LoaderSettings":
        """``loader`` as given by a dataset config (a mapping of the four ``loader.*`` keys) or already built.
        Only ``prefetch_factor`` may be None; another None means that nothing chose the value."""
        if isinstance(loader, cls):
            return loader
        names = [f.name for f in fields(cls)]
        unknown = sorted(set(loader) - set(names))
        unset = [name for name in names if name != "prefetch_factor" and loader.get(name) is None]
        if unknown or unset:
            raise ConfigError(
                f"dataset loader settings: unknown {unknown}, not set {unset}. The keys are loader."
                f"{', loader.'.join(names)} (conf/config.yaml); a training run chooses those left null for its device "
                "(textcore/device_settings.py), so a datamodule built outside one is given all of them, e.g. "
                "num_workers=0, pin_memory=false, persistent_workers=false, prefetch_factor=null")
        prefetch = loader.get("prefetch_factor")
        return cls(int(loader["num_workers"]), bool(loader["pin_memory"]), bool(loader["persistent_workers"]),
                   None if prefetch is None else int(prefetch))

    def dataloader_kwargs(self, persistent: bool = True) -> dict:
        """DataLoader keyword arguments: ``persistent_workers`` and ``prefetch_factor`` only with workers
        (DataLoader refuses them without); ``persistent=False`` for a loader whose workers must start afresh
        each epoch (a streamed file)."""
        options = {"num_workers": self.num_workers, "pin_memory": self.pin_memory}
        if self.num_workers > 0:
            options["persistent_workers"] = self.persistent_workers and persistent
            if self.prefetch_factor:
                options["prefetch_factor"] = self.prefetch_factor
        return options
