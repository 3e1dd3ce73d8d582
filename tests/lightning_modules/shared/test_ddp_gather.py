"""Two gloo processes with half a batch each give the single-process loss and gradients."""
import torch
import torch.distributed as dist

from lightning_modules.shared.contrastive import nt_xent
from lightning_modules.shared.distributed import ddp_loss_scale, gather_with_grad
from tests.helpers.ddp import spawn_gloo

N, D_IN, D_OUT, TAU = 8, 6, 5, 0.5


def fixed_problem():
    g = torch.Generator().manual_seed(0)
    x1, x2 = torch.randn(N, D_IN, generator=g), torch.randn(N, D_IN, generator=g)
    weight = torch.randn(D_IN, D_OUT, generator=g)
    return x1, x2, weight


def single_process():
    x1, x2, weight = fixed_problem()
    weight = weight.clone().requires_grad_(True)
    x1.requires_grad_(True)
    loss = nt_xent(x1 @ weight, x2 @ weight, TAU)
    loss.backward()
    return loss.detach(), weight.grad, x1.grad


def worker(rank: int, world: int, out_dir: str):
    x1, x2, weight = fixed_problem()
    half = slice(rank * N // world, (rank + 1) * N // world)
    local1 = x1[half].clone().requires_grad_(True)
    weight = weight.clone().requires_grad_(True)
    z1 = gather_with_grad(local1 @ weight)  # [N, D_OUT]
    z2 = gather_with_grad(x2[half] @ weight)  # [N, D_OUT]
    loss = nt_xent(z1, z2, TAU)
    input_grad = torch.autograd.grad(loss, local1, retain_graph=True)[0]
    (loss * ddp_loss_scale()).backward()
    grad = weight.grad.clone()
    dist.all_reduce(grad)  # what DDP does: average the parameter gradients
    grad /= world
    torch.save({"loss": loss.detach(), "weight_grad": grad, "input_grad": input_grad}, f"{out_dir}/rank{rank}.pt")


def test_two_process_gather_equals_one_process(tmp_path):
    world = 2
    spawn_gloo(worker, world, tmp_path)
    loss, weight_grad, input_grad = single_process()
    for rank in range(world):
        result = torch.load(tmp_path / f"rank{rank}.pt")
        assert abs(result["loss"].item() - loss.item()) < 1e-6
        assert torch.allclose(result["weight_grad"], weight_grad, atol=1e-6)
        half = slice(rank * N // world, (rank + 1) * N // world)
        assert torch.allclose(result["input_grad"], input_grad[half], atol=1e-6)


def test_gather_is_identity_without_process_group():
    x = torch.randn(3, 2)
    assert gather_with_grad(x) is x
    assert ddp_loss_scale() == 1.0
