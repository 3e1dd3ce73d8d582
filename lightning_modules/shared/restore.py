"""A method's LightningModule from a checkpoint that is already loaded (``textcore.run_folder.load_checkpoint``).

``LightningModule.load_from_checkpoint`` would read the file again, with its own ``torch.load``; here the dict read
once, safely, is given to the same steps Lightning takes after its read: the checkpoint's migration to this
Lightning version, the module built from its ``hyper_parameters``, ``on_load_checkpoint`` and ``load_state_dict``.
"""
from __future__ import annotations

from lightning_modules.shared.registry import method_class


def module_from_checkpoint(checkpoint: dict, target: str, key: str = "method._target_"):
    """The module of class ``target`` (checked by ``registry.method_class``) holding ``checkpoint``'s weights, in
    eval mode on the CPU."""
    from lightning.pytorch.core.saving import _load_state
    from lightning.pytorch.utilities.migration.utils import _pl_migrate_checkpoint

    cls = method_class(target, key)
    checkpoint = _pl_migrate_checkpoint(checkpoint)
    checkpoint.setdefault(cls.CHECKPOINT_HYPER_PARAMS_KEY, {})
    module = _load_state(cls, checkpoint)  # Lightning's own step after its read (load_from_checkpoint)
    module.eval()
    return module
