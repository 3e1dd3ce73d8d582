"""scripts/studies/authors_aecl.py's ``ours_state_for_theirs``: one of our AECL checkpoints loaded into the
authors' network and their two Adam optimisers (aecl_side_by_side.py's swap: both codes train stage 3 from one state).

Their Network is stood in for by a module with their attribute names and layers (network.py: backbone,
instance_projector, TransformerEncoderLayer(128, 1, 256), cluster_projector, the unused Common_view), built
here from torch modules, with its own random initialisation.
"""
from __future__ import annotations

import copy
import itertools

import pytest
import torch
from torch import nn

from tests.helpers import load_script
from tests.helpers.speed import CHUNKS

AUTHORS = load_script("studies/authors_aecl")
D, M = 128, 3


class TheirNetwork(nn.Module):
    def __init__(self, backbone: nn.Module, dim: int):
        super().__init__()
        self.backbone = backbone
        self.instance_projector = nn.Sequential(nn.Linear(dim, dim), nn.ReLU(), nn.Linear(dim, D))
        self.cluster_projector = nn.Sequential(nn.Dropout(0.5), nn.Linear(D, dim), nn.ReLU(), nn.Dropout(0.5),
                                               nn.Linear(dim, dim), nn.ReLU(), nn.Linear(dim, M))
        self.TransformerEncoderLayer = nn.TransformerEncoderLayer(D, nhead=1, dim_feedforward=256)
        self.Common_view = nn.Sequential(nn.Linear(D * 2, D))


def _their_side(ours):
    backbone = copy.deepcopy(ours.encoder.backbone)
    torch.manual_seed(123)
    for p in backbone.parameters():  # not our weights: the load must set them
        nn.init.normal_(p, std=0.5)
    model = TheirNetwork(backbone, ours.encoder.dim)
    optimizer = torch.optim.Adam(model.backbone.parameters(), lr=5e-6)
    optimizer_head = torch.optim.Adam(itertools.chain(model.instance_projector.parameters(),
                                                      model.cluster_projector.parameters(),
                                                      model.TransformerEncoderLayer.parameters()), lr=5e-4)
    return model, optimizer, optimizer_head


@pytest.fixture
def trained():
    """Our AECL after two optimizer steps (Adam states with step 2), as a checkpoint dict."""
    from lightning_modules.aecl import AECL

    torch.manual_seed(0)
    ours = AECL(num_clusters=M, backbone="tiny", chunk_tokens=CHUNKS, reference=True, lr=5e-6, head_lr_multiplier=100.0)
    ours.log = lambda *args, **kwargs: None
    optimizer = ours.configure_optimizers()
    texts = ["alpha beta gamma", "delta epsilon", "zeta eta theta iota", "kappa lambda mu", "nu xi omicron pi"]
    for _ in range(2):
        batch = {"index": torch.arange(len(texts)), "view1": ours.encoder.tokenize(texts),
                 "view2": ours.encoder.tokenize(texts[::-1])}
        ours.training_step(batch, 0).backward()
        optimizer.step()
        optimizer.zero_grad()
    return ours, optimizer, {"state_dict": ours.state_dict(), "optimizer_states": [optimizer.state_dict()]}


def _ours_by_their_name(ours) -> dict[str, nn.Parameter]:
    named = {}
    for name, param in ours.named_parameters():
        their = AUTHORS._their_name(name)
        if their is not None:
            named[their] = param
    return named


def test_weights_and_adam_states_land_on_the_parameters_of_the_same_name(trained):
    ours, our_optimizer, checkpoint = trained
    model, optimizer, optimizer_head = _their_side(ours)
    AUTHORS.ours_state_for_theirs(checkpoint, model, optimizer, optimizer_head)

    ours_named = _ours_by_their_name(ours)
    theirs = dict(model.named_parameters())
    assert set(ours_named) == {k for k in theirs if not k.startswith("Common_view.")}
    with_state = 0
    for name, mine in ours_named.items():
        assert torch.equal(theirs[name], mine), name
        target = optimizer if name.startswith("backbone.") else optimizer_head
        if mine in our_optimizer.state:
            with_state += 1
            got, want = target.state[theirs[name]], our_optimizer.state[mine]
            assert torch.equal(got["exp_avg"], want["exp_avg"]) and torch.equal(got["exp_avg_sq"], want["exp_avg_sq"])
            assert float(got["step"]) == 2.0 and got["step"].device.type == "cpu"
        else:
            assert theirs[name] not in target.state
    assert with_state > 20  # the heads and most of the backbone had gradients


def test_one_more_step_moves_both_sides_alike(trained):
    """The functional check: the same gradients on both sides give the same weights after their optimisers'
    step as after ours (the Adam moments and step counts, bias correction included, were carried over)."""
    ours, our_optimizer, checkpoint = trained
    model, optimizer, optimizer_head = _their_side(ours)
    AUTHORS.ours_state_for_theirs(checkpoint, model, optimizer, optimizer_head)
    ours_named = _ours_by_their_name(ours)
    theirs = dict(model.named_parameters())
    generator = torch.Generator().manual_seed(7)
    for name, mine in ours_named.items():
        if mine in our_optimizer.state:
            grad = torch.randn(mine.shape, generator=generator)
            mine.grad, theirs[name].grad = grad.clone(), grad.clone()
    our_optimizer.step()
    optimizer.step()
    optimizer_head.step()
    for name, mine in ours_named.items():
        assert torch.allclose(theirs[name], mine, rtol=0, atol=1e-7), name


def test_a_checkpoint_of_another_shape_is_refused(trained):
    ours, _, checkpoint = trained
    model, optimizer, optimizer_head = _their_side(ours)
    model.cluster_projector[-1] = nn.Linear(ours.encoder.dim, M + 1)  # a head for another number of clusters
    with pytest.raises((SystemExit, RuntimeError)):
        AUTHORS.ours_state_for_theirs(checkpoint, model, optimizer, optimizer_head)
