"""The losses make their index and mask tensors on the inputs' device (a copy CUDA counted on an H100).

A tensor built on the host and then moved to the GPU (``torch.arange(n).to(z.device)``) is a copy from pageable
memory: CUDA makes the host wait for it, every step. On a CPU machine it costs nothing and cannot be seen, so the
losses run here on the ``meta`` device (shapes only, no data) under a dispatch mode that records every operation
taking a host tensor (more than a scalar) beside meta tensors or copying one to the meta device.
"""
from __future__ import annotations

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten

from lightning_modules.aecl.losses import cluster_contrastive_loss, pseudo_label_loss, similarity_guided_loss
from lightning_modules.shared.contrastive import nt_xent, partner_index


class HostTensorsToDevice(TorchDispatchMode):
    """Records the operations that move a host tensor (dim > 0) to the meta device or mix one with meta tensors,
    and the Python values put there with ``torch.tensor``/``torch.as_tensor`` (built below the dispatcher, so
    those two are wrapped while the mode is on)."""

    def __init__(self):
        super().__init__()
        self.seen: list[str] = []
        self._saved = {}

    def __enter__(self):
        for name in ("tensor", "as_tensor"):
            original = self._saved[name] = getattr(torch, name)

            def wrapper(*args, _original=original, _name=name, **kwargs):
                device = kwargs.get("device")
                if device is not None and torch.device(device).type == "meta":
                    self.seen.append(f"torch.{_name} on the device")
                return _original(*args, **kwargs)

            setattr(torch, name, wrapper)
        return super().__enter__()

    def __exit__(self, *exc):
        for name, original in self._saved.items():
            setattr(torch, name, original)
        return super().__exit__(*exc)

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        tensors = [t for t in tree_flatten((args, kwargs))[0] if isinstance(t, torch.Tensor)]
        host = [t for t in tensors if t.device.type == "cpu" and t.dim() > 0]
        target = kwargs.get("device")
        to_meta = target is not None and torch.device(target).type == "meta"
        if host and (to_meta or any(t.device.type == "meta" for t in tensors)):
            self.seen.append(str(func))
        return func(*args, **kwargs)


def on_meta(*shapes):
    return [torch.randn(*shape, device="meta") for shape in shapes]


def test_the_recorder_sees_a_host_tensor_moved_to_the_device():
    (z,) = on_meta((4, 3))
    for move in (lambda: torch.arange(4).to(z.device), lambda: torch.tensor(4, device=z.device)):
        with HostTensorsToDevice() as mode:
            move()
        assert mode.seen, "the recorder must see the pattern it is there to catch"
    assert torch.tensor.__name__ == "tensor"  # unwrapped again


def test_partner_index_pairs_each_view_with_the_other():
    assert partner_index(3).tolist() == [3, 4, 5, 0, 1, 2]  # hand-written for N = 3
    assert partner_index(3, "meta").device.type == "meta"


@pytest.mark.parametrize("name", ["nt_xent", "aecl_cluster_paper", "aecl_cluster_reference", "aecl_instance_paper",
                                  "aecl_instance_reference", "aecl_pseudo_labelled", "aecl_pseudo_batch"])
def test_losses_build_no_host_tensor_for_the_device(name):
    n, d, m = 6, 5, 3
    z0, z1, h0, h1 = on_meta((n, d), (n, d), (n, d), (n, d))
    s0, s1 = on_meta((n, n), (n, n))
    p0, p1 = on_meta((n, m), (n, m))
    clusters = torch.zeros(n, dtype=torch.long, device="meta")
    calls = {
        "nt_xent": lambda: nt_xent(z0, z1),
        "aecl_cluster_paper": lambda: cluster_contrastive_loss(p0, p1),
        "aecl_cluster_reference": lambda: cluster_contrastive_loss(p0, p1, reference=True),
        "aecl_instance_paper": lambda: similarity_guided_loss(z0, z1, h0, h1, s0, s1, clusters),
        "aecl_instance_reference": lambda: similarity_guided_loss(z0, z1, h0, h1, s0, s1, clusters, form="reference"),
        "aecl_pseudo_labelled": lambda: pseudo_label_loss(p0, clusters),
        "aecl_pseudo_batch": lambda: pseudo_label_loss(p0, clusters, reduction="batch"),
    }
    with HostTensorsToDevice() as mode:
        loss = calls[name]()
    assert loss.device.type == "meta"
    assert mode.seen == []
