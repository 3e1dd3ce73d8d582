"""A checkpoint that would run code when unpickled: the project must never load it without the user's opt-in.

:func:`plant` adds to a checkpoint one pickled object whose ``__reduce__`` runs a shell command that creates a marker
file, as a tampered file from elsewhere would; the marker tells whether anything ran it."""
from __future__ import annotations

import os
import shlex
from pathlib import Path

import torch


class Payload:
    """Unpickled without ``weights_only``, this runs ``touch <marker>`` (``os.system``)."""

    def __init__(self, marker: Path):
        self.marker = str(marker)

    def __reduce__(self):
        return os.system, (f"touch {shlex.quote(self.marker)}",)


def plant(checkpoint: Path, marker: Path) -> Path:
    """Add a :class:`Payload` to ``checkpoint`` (rewritten in place); returns ``checkpoint``."""
    state = torch.load(checkpoint, map_location="cpu", weights_only=True)
    state["note"] = Payload(marker)
    torch.save(state, checkpoint)
    assert not Path(marker).exists()
    return checkpoint
