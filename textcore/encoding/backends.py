"""The names of what can embed a corpus outside training (``backend=``), without importing torch: a command's
``--help`` and the Python API's constructor read them. The backends themselves: ``textcore.encoding.onnx_runtime``."""
from __future__ import annotations

from textcore.errors import ConfigError

BACKENDS = ("torch", "onnx", "onnx-int8")


def check_backend(backend: str, key: str = "backend") -> str:
    """``backend`` when it is one of :data:`BACKENDS`; else one line naming the choices (``key``: the option)."""
    if backend not in BACKENDS:
        raise ConfigError(f"{key}='{backend}': choose one of {', '.join(BACKENDS)}.")
    return backend
