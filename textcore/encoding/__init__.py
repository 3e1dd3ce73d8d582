"""The text encoder every layer uses, without Lightning: backbones and tokenizers by name, token counts and
chunk plans, PromptBERT templates, cached gradients and :class:`~textcore.encoding.encoder.TextEncoder`."""
