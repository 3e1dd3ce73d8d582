"""scripts/minilm_for_device.py: the backbone's weights carried as float16 and restored as float32."""
import hashlib

import pytest
import torch
from safetensors.torch import load_file, save_file

from tests.helpers import load_script

CARRY = load_script("minilm_for_device")


def test_pack_and_restore_give_the_float16_rounded_weights_as_float32(tmp_path):
    weights = {"a.weight": torch.tensor([[1.0, 1e-3, -3.14159265]]), "b.bias": torch.tensor([2.0 ** -20, 70000.0 / 7])}
    source = tmp_path / "model.safetensors"
    save_file(weights, source)
    packed = tmp_path / "carry" / "minilm_fp16.safetensors"
    meta = CARRY.pack(source, packed)
    assert meta["float32_sha256"] == hashlib.sha256(source.read_bytes()).hexdigest()
    # 3.14159265 in float16 is 3.140625: an error of 0.00097 against the tensor's largest weight, 3.14159
    assert float(meta["largest_rounding_vs_tensor_max"]) == pytest.approx(0.00097 / 3.14159, rel=0.01)
    assert {t.dtype for t in load_file(packed).values()} == {torch.float16}

    model_dir = tmp_path / "site_model"
    with pytest.raises(SystemExit, match="no config.json: make .gpu with scripts/prepare_gpu_folder.py"):
        CARRY.restore(packed, model_dir)
    model_dir.mkdir()
    (model_dir / "config.json").write_text("{}")
    assert CARRY.restore(packed, model_dir)["float32_sha256"] == meta["float32_sha256"]
    restored = load_file(model_dir / "model.safetensors")
    assert restored["a.weight"].dtype == torch.float32
    assert restored["a.weight"].tolist() == [[1.0, weights["a.weight"][0, 1].half().item(), -3.140625]]
    assert restored["b.bias"][1].item() == 10000.0


def test_weights_float16_cannot_hold_are_refused(tmp_path):
    source = tmp_path / "model.safetensors"
    save_file({"w": torch.tensor([1.0, 1e6])}, source)
    with pytest.raises(SystemExit, match="outside float16's range"):
        CARRY.pack(source, tmp_path / "packed.safetensors")
