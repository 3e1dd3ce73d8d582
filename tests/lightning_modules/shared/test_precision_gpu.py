"""Mixed precision against float32 for every method, from the same state: the loss of one step and the
parameters after three steps (bf16 and fp16 on a GPU; bf16 also on the CPU, so the code path runs here).
ClusterNS's in-batch clustering and AECL's attention over samples are checked as the sensitive parts.

Tolerances (stated here, measured on a GPU by `make precision-gpu`): loss within 3 % of float32; every
parameter after three Adam steps within 2e-2 of float32's (the updates are lr-sized, so this bounds the drift);
ClusterNS's cluster assignments equal for at least 90 % of the batch; AECL's attention rows within 5e-2."""
from __future__ import annotations

import copy

import pytest
import torch

from tests.lightning_modules.shared.test_chunked_encoder import METHODS
from tests.lightning_modules.shared.test_grad_cache import dropout

CUDA = torch.cuda.is_available()
CASES = [("cpu", torch.bfloat16)] + [pytest.param("cuda", dtype, marks=pytest.mark.skipif(
    not CUDA, reason="needs a CUDA GPU (make precision-gpu on a GPU machine)")) for dtype in (torch.bfloat16,
                                                                                              torch.float16)]


def prepared(method: str, device: str):
    torch.manual_seed(0)
    module, batch = METHODS[method]()
    module.log = lambda *args, **kwargs: None
    module.train()
    dropout(module, 0.0)  # the comparison is about arithmetic, not masks
    if method == "clusterns":
        module.kmean_cosine = 1.0
    if method == "aecl":
        module.set_stage(3)
    batch = {k: ({kk: vv.to(device) for kk, vv in v.items()} if hasattr(v, "items") else v.to(device))
             for k, v in batch.items()}
    return module.to(device), batch


def steps(module, batch, device: str, dtype, n: int = 3):
    module = copy.deepcopy(module)
    optimizer = torch.optim.Adam(module.parameters(), lr=1e-4)
    scaler = torch.amp.GradScaler(device, enabled=dtype == torch.float16)
    losses = []
    for i in range(n):
        optimizer.zero_grad()
        with torch.autocast(device, dtype=dtype, enabled=dtype is not None):
            loss = module.training_step(batch, i)
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
        losses.append(float(loss.detach()))
    return losses, module


@pytest.mark.parametrize("device,dtype", CASES)
@pytest.mark.parametrize("method", sorted(METHODS))
def test_mixed_precision_follows_float32(method, device, dtype):
    module, batch = prepared(method, device)
    reference, ref_module = steps(module, batch, device, None)
    mixed, mixed_module = steps(module, batch, device, dtype)
    assert abs(mixed[0] - reference[0]) <= 0.03 * abs(reference[0]) + 1e-4, (mixed, reference)
    drift = max(float((a - b).abs().max()) for a, b in zip(ref_module.parameters(), mixed_module.parameters()))
    assert drift < 2e-2, drift
    if method == "clusterns":
        from lightning_modules.shared.inbatch_clustering import assign

        z = ref_module.embed_views([batch["original"]])[0].detach()
        same = (assign(z, ref_module.centroids)[0] == assign(z, mixed_module.centroids)[0]).float().mean()
        assert same >= 0.9, float(same)
    if method == "aecl":
        with torch.no_grad():
            z = ref_module.projector(ref_module.embed_views([batch["view1"]])[0])
            _, s_ref = ref_module.attention(z)
            with torch.autocast(device, dtype=dtype):
                _, s_mixed = ref_module.attention(z)
        assert float((s_ref - s_mixed.float()).abs().max()) < 5e-2
