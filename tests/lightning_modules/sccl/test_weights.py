"""SCCL's loss weights per setting and augmentation mode (docs/methods/sccl.md): the reference code's (1, 1)
with explicit views and (1, 0.5) with dropout-only views, the paper text's (1, 10)."""
from types import SimpleNamespace

import pytest
import torch

from ctclust.training.builders import instantiate_method, resolve_speed_settings
from lightning_modules.sccl.module import SCCL, resolve_loss_weights
from tests.helpers import compose_config
from tests.helpers.speed import CHUNKS


@pytest.mark.parametrize(
    "setting,augmentation,expected",
    [("reference", "explicit", (1.0, 1.0)), ("reference", "virtual", (1.0, 0.5)),
     ("paper", "explicit", (1.0, 10.0)), ("paper", "virtual", (1.0, 10.0))],
)
def test_weights_per_setting_and_mode(setting, augmentation, expected):
    assert resolve_loss_weights(setting, augmentation) == expected


def test_a_number_overrides_the_table():
    assert resolve_loss_weights("reference", "virtual", cluster_weight=2.0) == (1.0, 2.0)
    assert resolve_loss_weights("paper", "explicit", instance_weight=0.3) == (0.3, 10.0)


def test_unknown_setting_or_mode_is_a_clear_error():
    with pytest.raises(ValueError, match="loss_weights"):
        resolve_loss_weights("code", "explicit")
    with pytest.raises(ValueError, match="augmentation"):
        resolve_loss_weights("reference", "contextual")


@pytest.mark.parametrize(
    "overrides,expected",
    [(["dataset=searchsnippets"], (1.0, 1.0)),  # explicit EDA column
     (["dataset=demo"], (1.0, 0.5)),  # virtual views
     (["experiment=sccl_googlenews_ts"], (10.0, 1.0)),  # the authors' runs: --eta 10, explicit views
     (["experiment=sccl_searchsnippets"], (10.0, 1.0)),
     (["experiment=sccl_searchsnippets", "dataset.augmentation=virtual"], (10.0, 0.5)),
     (["dataset=searchsnippets", "method.loss_weights=paper"], (1.0, 10.0)),
     (["dataset=demo", "method.cluster_weight=3"], (1.0, 3.0))],
)
def test_configs_give_the_module_the_weights_of_their_mode(tmp_path, overrides, expected):
    cfg = compose_config(["method=sccl", *overrides, "backbone=tiny"], tmp_path)
    resolve_speed_settings(cfg)  # as the run does before building anything
    module = instantiate_method(cfg)
    assert (module.instance_weight, module.cluster_weight) == expected
    assert (module.hparams.instance_weight, module.hparams.cluster_weight) == expected  # what results record


def test_training_loss_uses_the_resolved_weights():
    torch.manual_seed(0)
    module = SCCL(num_clusters=2, backbone="tiny", chunk_tokens=CHUNKS, augmentation="virtual")
    module.set_centroids(torch.randn(2, module.encoder.dim))
    module.eval()  # the same embeddings for both views: the loss terms are deterministic
    tokens = module.encoder.tokenize(["pasta sauce", "planet orbit", "python bug", "bread oven"])
    logged = {}
    module.log = lambda name, value, **kwargs: logged.__setitem__(name, float(torch.as_tensor(value).detach()))
    total = module.training_step({"view1": tokens, "view2": tokens}, 0)
    assert logged["train/cluster_loss"] > 0
    expected = logged["train/instance_loss"] + 0.5 * logged["train/cluster_loss"]
    assert float(total.detach()) == pytest.approx(expected, rel=1e-6)


def test_weights_set_for_one_mode_refuse_a_datamodule_of_the_other():
    module = SCCL(num_clusters=2, backbone="tiny", chunk_tokens=CHUNKS, augmentation="explicit")
    module._trainer = SimpleNamespace(datamodule=SimpleNamespace(augmentation="virtual"))
    with pytest.raises(ValueError, match="method.augmentation=virtual"):
        module.on_fit_start()
    module._trainer = SimpleNamespace(datamodule=SimpleNamespace(augmentation="explicit"))
    module.on_fit_start()
