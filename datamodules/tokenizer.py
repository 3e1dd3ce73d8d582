"""The tokenizer of a datamodule, loaded on first use."""
from __future__ import annotations

from typing import Any

from textcore.encoding.backbone import load_tokenizer


class LazyTokenizer:
    """Mixin: ``self.tokenizer`` is ``self.tokenizer_spec`` when that is a tokenizer object, else the tokenizer
    :func:`load_tokenizer` gives for that name ("minilm", "tiny", a Hub name or a folder), loaded on first use
    (a datamodule is built and checked before any model file is read)."""

    tokenizer_spec: Any = "minilm"
    _tokenizer: Any = None

    @property
    def tokenizer(self):
        if self._tokenizer is None:
            spec = self.tokenizer_spec
            self._tokenizer = load_tokenizer(spec) if isinstance(spec, str) else spec
        return self._tokenizer
