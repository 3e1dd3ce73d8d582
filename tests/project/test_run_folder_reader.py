"""textcore.run_folder's reader: a run folder from elsewhere is data, never code (docs/reliability.md, "What a run
folder is trusted with"). A checkpoint is read with weights_only; the class a run's config names is checked before
anything is imported or called."""
from __future__ import annotations

import lzma
import shutil
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from lightning_modules.shared.registry import NotAMethodError, method_class, same_class
from tests.helpers.payload import plant
from textcore import run_folder
from textcore.errors import MissingFileError
from textcore.run_folder import (
    RunFileError,
    RunFolder,
    UnreadableCheckpointError,
    UntrustedCheckpointError,
    load_checkpoint,
)

OLD_CHECKPOINT = Path(__file__).resolve().parents[1] / "fixtures" / "sccl_tiny_before_method_folders_step3.ckpt.xz"


def small_checkpoint(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    torch.save({"state_dict": {"encoder.w": torch.arange(6.0)}, "hyper_parameters": {"backbone": "tiny"},
                "global_step": 3}, path)
    return path


def one_line(err: BaseException) -> str:
    text = str(err)
    assert "\n" not in text, text
    return text


def test_a_checkpoint_holding_code_is_refused_in_one_line_and_nothing_runs(tmp_path):
    marker = tmp_path / "ran"
    ckpt = plant(small_checkpoint(tmp_path / "run" / run_folder.LAST_CHECKPOINT), marker)
    with pytest.raises(UntrustedCheckpointError) as caught:
        load_checkpoint(ckpt, key="--run")
    message = one_line(caught.value)
    assert f"--run={ckpt}" in message and "system" in message and run_folder.TRUST_OPTION in message
    assert "trust_checkpoint=True" in message
    assert not marker.exists()
    with pytest.raises(UntrustedCheckpointError):
        RunFolder(tmp_path / "run").checkpoint()
    assert not marker.exists()


def test_with_the_opt_in_the_same_file_loads(tmp_path):
    marker = tmp_path / "ran"
    ckpt = plant(small_checkpoint(tmp_path / "x.ckpt"), marker)
    loaded = load_checkpoint(ckpt, trust=True)
    assert torch.equal(loaded["state_dict"]["encoder.w"], torch.arange(6.0))
    assert marker.exists()  # what the user allowed: the file's own code ran


def test_a_checkpoint_of_an_earlier_version_loads_without_the_opt_in(tmp_path):
    path = tmp_path / "old.ckpt"
    with lzma.open(OLD_CHECKPOINT) as src, path.open("wb") as dst:
        shutil.copyfileobj(src, dst)
    loaded = load_checkpoint(path)
    assert loaded["module_class"] == "lightning_modules.sccl.SCCL" and loaded["global_step"] == 3
    assert loaded["optimizer_states"] and loaded["state_dict"]


def test_a_truncated_or_missing_checkpoint_is_one_line(tmp_path):
    good = small_checkpoint(tmp_path / "good.ckpt")
    broken = tmp_path / "broken.ckpt"
    broken.write_bytes(good.read_bytes()[:200])
    with pytest.raises(UnreadableCheckpointError) as caught:
        load_checkpoint(broken, key="ckpt_path")
    assert f"ckpt_path={broken} is not a readable checkpoint" in one_line(caught.value)
    with pytest.raises(MissingFileError, match="does not exist"):
        load_checkpoint(tmp_path / "nope.ckpt")


def test_the_lightning_checkpoint_io_of_a_run_refuses_it_too(tmp_path):
    """What a resume and an eval-only run go through (``trainer.fit(ckpt_path=...)``)."""
    from lightning.fabric.plugins.io.torch_io import TorchCheckpointIO

    from callbacks.safety.checkpointing import AtomicCheckpointIO

    marker = tmp_path / "ran"
    ckpt = plant(small_checkpoint(tmp_path / "x.ckpt"), marker)
    with pytest.raises(UntrustedCheckpointError, match="ckpt_path="):
        AtomicCheckpointIO().load_checkpoint(ckpt)
    with pytest.raises(Exception, match="Weights only load failed"):  # a user's own plugin: the trainer's flag
        TorchCheckpointIO().load_checkpoint(ckpt, weights_only=True)
    assert not marker.exists()
    loaded = {str(ckpt): {"state_dict": {}, "read": "before"}}
    assert AtomicCheckpointIO(loaded=loaded).load_checkpoint(ckpt)["read"] == "before"  # not read a second time
    assert AtomicCheckpointIO(trust=True).load_checkpoint(ckpt)["global_step"] == 3 and marker.exists()


def test_a_run_folder_reads_its_files_by_name(tmp_path):
    run = RunFolder(tmp_path / "run")
    ckpt = small_checkpoint(run.checkpoint_path())
    assert run.results() is None and run.config() is None and run.centres() is None and run.predictions() is None
    run.results_file.write_text('{"status": "finished", "steps": 4}')
    run.config_file.write_text("method:\n  _target_: lightning_modules.sccl.module.SCCL\nbatch_size: 8\n")
    np.save(run.path / run_folder.CENTRES, np.eye(3, dtype=np.float64))
    (run.path / run_folder.PREDICTIONS).write_text("text,label,kmeans_cluster\nNA,None,1\n")
    assert run.results() == {"status": "finished", "steps": 4}
    assert run.config().batch_size == 8 and run.method_target() == "lightning_modules.sccl.module.SCCL"
    assert run.centres().dtype == np.float32 and run.centres().shape == (3, 3)
    assert run.predictions()["text"].tolist() == ["NA"]  # a text, not a missing value
    assert RunFolder.of_checkpoint(ckpt).path == run.path and RunFolder.of_checkpoint(tmp_path / "x.ckpt") is None
    assert run.checkpoint()["global_step"] == 3


def test_unreadable_files_name_themselves_and_pickled_arrays_are_refused(tmp_path):
    run = RunFolder(tmp_path)
    run.results_file.write_text('{"status": ')
    with pytest.raises(RunFileError, match=r"results\.json' is not readable JSON"):
        run.results()
    np.save(tmp_path / run_folder.CENTRES, np.array([{"a": 1}], dtype=object), allow_pickle=True)
    with pytest.raises(RunFileError, match="kmeans_centroids.npy"):
        run.centres()
    with pytest.raises(MissingFileError, match="has no checkpoints/last.ckpt"):
        run.checkpoint()


@pytest.mark.skipif(not Path("/dev/zero").exists(), reason="needs /dev/zero")
def test_a_file_that_is_a_device_is_not_read_forever(tmp_path):
    run = RunFolder(tmp_path)
    run.results_file.symlink_to("/dev/zero")
    run.checkpoint_path().parent.mkdir()
    run.checkpoint_path().symlink_to("/dev/zero")
    assert run.results() is None
    with pytest.raises(UnreadableCheckpointError, match="not a file"):
        load_checkpoint(run.checkpoint_path())


@pytest.mark.parametrize("target", ["os.system", "subprocess.Popen", "collections.OrderedDict", "builtins.eval",
                                    "lightning_modules.shared.contrastive.nt_xent",
                                    "lightning_modules.shared.heads.ContrastHead", "os.system; rm", 42, None])
def test_a_method_target_that_is_not_a_method_class_is_one_line_and_nothing_is_called(target):
    with pytest.raises(NotAMethodError) as caught:
        method_class(target, key="method._target_ of 'run/config_resolved.yaml'")
    message = one_line(caught.value)
    assert "method._target_ of 'run/config_resolved.yaml'" in message and f"'{target}'" in message


def test_a_module_outside_the_methods_is_not_even_imported(tmp_path, monkeypatch):
    """Importing a module runs its top level: a config naming one must not import it."""
    marker = tmp_path / "imported"
    (tmp_path / "planted_module.py").write_text(f"open({str(marker)!r}, 'w').close()\nclass Thing: pass\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(NotAMethodError):
        method_class("planted_module.Thing")
    assert not same_class("planted_module.Thing", "lightning_modules.sccl.SCCL")
    assert not marker.exists() and "planted_module" not in sys.modules


def test_the_methods_and_an_old_class_path_are_used():
    from lightning_modules.sccl.module import SCCL

    assert method_class("lightning_modules.sccl.SCCL") is SCCL  # what checkpoints of the flat layout record
    assert method_class("lightning_modules.aecl.module.AECL").__name__ == "AECL"
