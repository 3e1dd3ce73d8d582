"""Is a Hugging Face Hub model usable here? A quick answer before ``from_pretrained`` retries for a minute.

Without network (and without ``HF_HUB_OFFLINE=1``), ``from_pretrained`` of a Hub name retries its
requests before it fails. ``offline_reason`` answers in about a second: None when the model is in the
local cache or the Hub answers, otherwise why not, for the one-line error message.
"""
from __future__ import annotations

import os
from pathlib import Path


def cached(name: str, repo_type: str = "model") -> bool:
    """The repository's ``config.json`` is in the local Hugging Face cache."""
    from huggingface_hub import try_to_load_from_cache

    try:
        found = try_to_load_from_cache(repo_id=name, filename="config.json", repo_type=repo_type)
    except Exception:  # noqa: BLE001 - a malformed name: not cached
        return False
    return isinstance(found, str)


def offline_reason(name: str, timeout: float = 3.0) -> str | None:
    """None when ``name`` (a local folder or a Hub name) can be loaded as far as one can tell cheaply."""
    if Path(name).exists() or cached(name):
        return None
    if os.environ.get("HF_HUB_OFFLINE") == "1":
        return "HF_HUB_OFFLINE=1 is set and the model is not in the local cache"
    import socket

    from huggingface_hub import constants

    host = constants.ENDPOINT.split("://", 1)[-1].split("/", 1)[0]
    try:
        socket.create_connection((host, 443), timeout=timeout).close()
    except OSError as err:
        return f"the Hub ({host}) cannot be reached: {err.strerror or err}"
    return None
