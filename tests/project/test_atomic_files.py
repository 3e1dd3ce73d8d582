"""atomic_files: the one temporary-file-and-rename writer (checkpoints, results, augmented tables)."""
import errno
import json

import pytest

from textcore.atomic_files import atomic_write, atomic_write_text
from textcore.errors import ENVIRONMENT_ERRNOS, output_error


def test_a_failed_write_keeps_the_old_file_and_leaves_no_temporary_file(tmp_path):
    path = tmp_path / "results.json"
    atomic_write_text(path, "old")

    def half_then_fail(handle):
        handle.write(b"new, but only ha")
        raise OSError(errno.ENOSPC, "No space left on device")

    with pytest.raises(OSError):
        atomic_write(path, half_then_fail)
    assert path.read_text() == "old" and sorted(p.name for p in tmp_path.iterdir()) == ["results.json"]


def test_text_is_utf8_with_the_newline_asked_for_and_the_folder_is_made(tmp_path):
    path = tmp_path / "new" / "table.csv"
    atomic_write_text(path, "é\n", newline="")
    assert path.read_bytes() == "é\n".encode()


def test_one_errno_table_words_every_environment_error():
    message = str(output_error(OSError(errno.EFBIG, "File too large", "out.csv")))
    assert ENVIRONMENT_ERRNOS[errno.EFBIG] in message and "'out.csv'" in message and "\n" not in message


# -- a process killed in the middle of a write ------------------------------------------------------------------
# Every file a run writes for other programs (results.json, failed.json, the trials and aggregate tables,
# predictions.csv, checkpoints) is written by one of these, with content that grows with ``size``.
def _results(folder, size):
    from types import SimpleNamespace

    from omegaconf import OmegaConf

    from ctclust.training.results import write_results

    cfg = OmegaConf.create({"method": {"name": "sccl"}, "dataset": {"name": "toy"}, "backbone": {"name": "tiny"},
                            "seed": 0})
    trainer = SimpleNamespace(global_step=3, current_epoch=0, callbacks=[], is_global_zero=True)
    write_results(cfg, folder, trainer, {"status": "failed", "error": "x" * size}, {})


def _failed(folder, size):
    from runtime.multirun import write_failure

    write_failure(folder, RuntimeError("x" * size))


def _trials(folder, size):
    from evaluation.across_runs.sweep_trials import write_trials

    rows = [{"job": i, "method.lr": 0.001, "objective": "o", "value": 0.5, "status": "complete", "error": "",
             "note": "n" * 50, "run": str(folder / str(i))} for i in range(size // 50 + 1)]
    write_trials(rows, ["method.lr"], folder)


def _aggregate(folder, size):
    from evaluation.across_runs.aggregate import aggregate, write_outputs

    write_outputs(aggregate([]), folder, "t" * size)


def _predictions(folder, size):
    import csv

    from textcore.atomic_files import atomic_open

    with atomic_open(folder / "predictions.csv", newline="") as handle:  # what callbacks/evaluation writes with
        writer = csv.writer(handle)
        writer.writerow(["row", "text", "cluster"])
        writer.writerows([i, "some text", i % 7] for i in range(size // 10 + 1))


def _checkpoint(folder, size):
    import torch

    from callbacks.safety.checkpointing import atomic_save

    atomic_save({"global_step": 3, "w": torch.zeros(size // 4 + 1)}, folder / "checkpoints" / "last.ckpt")


def _plain_write_text(folder, size):  # the writer the others replaced: the fault must cut it short
    (folder / "results.json").write_text(json.dumps({"error": "x" * size}))


WRITERS = {"results.json": _results, "failed.json": _failed, "trials": _trials, "aggregate": _aggregate,
           "predictions.csv": _predictions, "checkpoint": _checkpoint, "plain write_text": _plain_write_text}
OLD, NEW, LIMIT = 100, 1_000_000, 200_000  # the kernel refuses a file's bytes past LIMIT: SIGXFSZ kills the process


def files(folder) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in folder.rglob("*") if p.is_file()
            and not p.name.endswith(".tmp")}


def killed_while_writing(name: str, folder) -> int:
    """Runs writer ``name`` with NEW's content in a process that the kernel kills (SIGXFSZ) once a file it writes
    passes LIMIT bytes; returns its exit status."""
    import subprocess
    import sys
    import textwrap

    from tests.helpers.data_files import ROOT

    script = textwrap.dedent(f"""
        import resource, signal, sys
        from pathlib import Path
        sys.path.insert(0, {str(ROOT)!r})
        from tests.project.test_atomic_files import WRITERS
        signal.signal(signal.SIGXFSZ, signal.SIG_DFL)  # Python ignores it: the write would raise instead
        resource.setrlimit(resource.RLIMIT_FSIZE, ({LIMIT}, {LIMIT}))
        WRITERS[{name!r}](Path({str(folder)!r}), {NEW})
    """)
    return subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, timeout=300).returncode


@pytest.mark.parametrize("name", [n for n in WRITERS if n != "plain write_text"])
def test_a_process_killed_in_the_middle_of_a_write_leaves_the_old_file_or_the_new_one(tmp_path, name):
    import signal

    old, new = tmp_path / "old", tmp_path / "new"
    for folder, size in ((old, OLD), (new, NEW)):
        folder.mkdir()
        WRITERS[name](folder, size)
    before, complete = files(old), files(new)
    assert max(map(len, complete.values())) > LIMIT  # the new content cannot be written whole under the limit

    assert killed_while_writing(name, old) == -signal.SIGXFSZ
    after = files(old)
    assert after.keys() == before.keys()
    for file, content in after.items():
        assert content in (before[file], complete[file]), f"{file}: neither the old file nor the new one"


def test_the_fault_cuts_a_plain_write_short(tmp_path):
    """The same fault on the writer the others replaced leaves a truncated file: the test above can fail."""
    import signal

    _plain_write_text(tmp_path, OLD)
    before = (tmp_path / "results.json").read_bytes()
    assert killed_while_writing("plain write_text", tmp_path) == -signal.SIGXFSZ
    after = (tmp_path / "results.json").read_bytes()
    assert after != before and len(after) == LIMIT
    with pytest.raises(ValueError):
        json.loads(after)
