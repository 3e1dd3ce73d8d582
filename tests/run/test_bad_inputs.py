"""Bad inputs stop with one message that names the file or key and the fix, never a traceback.

Most cases run ``ctclust.training.train.train`` in-process and take the error the way ``run.py``'s main does
(``textcore.errors.find_user_error`` on whatever was raised): that is what gets printed, as one line. A few
run the real entry point as a subprocess, where the console itself (exit code, stderr, no
traceback) is what is tested. docs/reliability.md "When the input is wrong" lists the cases.
"""
from __future__ import annotations

import errno
import json
import os
import subprocess
import sys
import warnings
from pathlib import Path

import pytest
import torch

import validation
from tests.helpers import compose_config
from tests.helpers.data_files import FAST, write_nli, write_short_text_csv, write_stsb, write_wiki
from tests.helpers.speed import CHUNKS, LOADER
from textcore.errors import USER_ERROR_EXIT_CODE, UserError, find_user_error

ROOT = Path(__file__).resolve().parents[2]


def user_error(overrides: list[str], out: Path) -> str:
    """The one-line message run.py would print for this run; fails if the run succeeds or the error
    is not a user error (a bug, which would keep its traceback)."""
    from ctclust.training.train import train

    with pytest.raises(Exception) as caught:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            train(compose_config(overrides, out))
    error = find_user_error(caught.value)
    assert error is not None, f"not a user error: {caught.value!r}"
    message = str(error)
    assert "\n" not in message and "Traceback" not in message
    return message


def tiny_csv(folder: Path, name: str = "texts.csv") -> list[str]:
    write_short_text_csv(folder / name, header=("label", "text", "aug"))
    return [f"data_dir={folder}", "dataset=csv", f"dataset.file={name}", *FAST]


def with_bad_byte(path: Path, line: int, text: str = "caf\xe9 au lait") -> Path:
    """Replace line ``line`` (1-based) of ``path`` by ``text`` encoded in latin-1 (invalid UTF-8)."""
    lines = path.read_bytes().split(b"\n")
    lines[line - 1] = text.encode("latin-1") + (b"," + lines[line - 1].split(b",", 1)[1] if b"," in lines[line - 1]
                                                 else b"")
    path.write_bytes(b"\n".join(lines))
    return path


def run_entry_point(args: list[str], cwd: Path = ROOT, timeout: int = 300) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "HYDRA_FULL_ERROR": "0"}
    return subprocess.run([sys.executable, *args], cwd=cwd, capture_output=True, text=True, timeout=timeout, env=env)


def assert_one_error_line(proc: subprocess.CompletedProcess, *fragments: str) -> str:
    assert proc.returncode == USER_ERROR_EXIT_CODE, (proc.returncode, proc.stderr[-3000:])
    assert "Traceback" not in proc.stderr, proc.stderr[-3000:]
    errors = [line for line in proc.stderr.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1, proc.stderr[-3000:]
    for fragment in fragments:
        assert fragment in errors[0], errors[0]
    return errors[0]


# -- text encodings ------------------------------------------------------------------------------------
def test_csv_not_utf8_names_file_and_line(tmp_path):
    overrides = tiny_csv(tmp_path)
    with_bad_byte(tmp_path / "texts.csv", 7)
    message = user_error(overrides, tmp_path / "run")
    assert "texts.csv' line 7" in message and "byte 0xe9 is not valid utf-8" in message
    assert "dataset.encoding=latin-1" in message


def test_csv_in_another_encoding_reads_with_dataset_encoding(tmp_path):
    from datamodules.short_text_corpus import load_corpus

    path = tmp_path / "latin.csv"
    path.write_bytes("label,text\na,café crème\nb,naïve idea\n".encode("latin-1"))
    corpus = load_corpus(path, "text", "label", encoding="latin-1")
    assert corpus.texts == ["café crème", "naïve idea"]
    utf8_bom = tmp_path / "bom.csv"
    utf8_bom.write_bytes("\ufefflabel,text\na,café\nb,thé\n".encode("utf-8"))
    assert load_corpus(utf8_bom, "text", "label").texts == ["café", "thé"]  # the BOM is not part of 'label'


def test_malformed_csv_names_the_file_and_the_line(tmp_path):
    (tmp_path / "bad.csv").write_text('label,text\na,ok\nb,"never closed\nc,x,y,z\n', encoding="utf-8")
    (tmp_path / "wide.csv").write_text("label,text\na,fine\nb,one,two\n", encoding="utf-8")
    # a quoted text over two lines before the bad row: pandas counts rows (it says line 4), the file has 5 lines
    (tmp_path / "spans.csv").write_text('label,text\na,"two\nlines"\nb,ok\nc,x,y\n', encoding="utf-8")
    for name, line, what in (("bad.csv", 3, "no quote closes it"), ("wide.csv", 3, "3 fields where the header has 2"),
                             ("spans.csv", 5, "3 fields where the header has 2")):
        message = user_error(["dataset=csv", f"data_dir={tmp_path}", f"dataset.file={name}", *FAST],
                             tmp_path / f"run_{name}")
        assert f"{name}' line {line}: " in message and what in message and "cannot be parsed as CSV" in message


@pytest.mark.slow
def test_a_bad_row_near_the_end_of_a_million_rows_stops_the_run_in_seconds(tmp_path):
    """Line 900,000 of a 1M-row CSV has a third field: the run stops before any model is built, naming the line."""
    import time

    rows = [f"text number {i} about topic {i % 8},t{i % 8}\n" for i in range(1_000_000)]
    rows[900_000 - 2] = "a text with a stray comma,t1,oops\n"  # file line 900,000 (the header is line 1)
    (tmp_path / "big.csv").write_text("text,label\n" + "".join(rows), encoding="utf-8")
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "run.py", "dataset=csv", f"data_dir={tmp_path}", "dataset.file=big.csv",
                           "backbone=tiny", f"hydra.run.dir={tmp_path / 'run'}"], cwd=ROOT, capture_output=True,
                          text=True, env=dict(os.environ, PROJECT_ROOT=str(ROOT)), timeout=300)
    seconds = time.perf_counter() - start
    assert done.returncode == USER_ERROR_EXIT_CODE, done.stderr[-2000:]
    assert "big.csv' line 900000: 3 fields where the header has 2" in done.stderr
    assert "Traceback" not in done.stderr and seconds < 60, seconds


def test_unknown_encoding_name(tmp_path):
    message = user_error(tiny_csv(tmp_path) + ["dataset.encoding=utf-9"], tmp_path / "run")
    assert "dataset.encoding: unknown encoding 'utf-9'" in message and "dataset.encoding=utf-8" in message


@pytest.mark.parametrize("name,layout", [("pairs.csv", "pair_csv"), ("pairs.jsonl", "jsonl")])
def test_nli_file_not_utf8_names_file_and_line(tmp_path, name, layout):
    from datamodules.nli_files import read_pairs

    path = tmp_path / name
    if layout == "jsonl":
        rows = [json.dumps({"sentence1": f"a {i}", "sentence2": f"b {i}", "gold_label": "entailment"})
                for i in range(8)]
        path.write_bytes("\n".join(rows).encode() + b"\n" + b'{"sentence1": "caf\xe9", "sentence2": "x", '
                         b'"gold_label": "entailment"}\n')
        bad_line = 9
    else:
        write_nli(path, n=12)
        with_bad_byte(path, 5)
        bad_line = 5
    with pytest.raises(UserError, match=rf"{name}' line {bad_line} .*not valid utf-8.*dataset.encoding=latin-1"):
        read_pairs(path)
    assert len(read_pairs(path, encoding="latin-1")) > 0


def test_nli_run_with_bad_byte_is_one_message(tmp_path):
    write_nli(tmp_path / "nli_sample.csv", n=12)
    with_bad_byte(tmp_path / "nli_sample.csv", 4)
    message = user_error(["method=pairsupcon", "dataset=nli", f"data_dir={tmp_path}", *FAST], tmp_path / "run")
    assert "nli_sample.csv' line 4" in message and "dataset.encoding=" in message


def test_wiki_reader_names_the_line_of_the_bad_byte(tmp_path):
    """Text files decode in 8 KiB chunks: the error used to name the line being read (line 1)."""
    path = write_wiki(tmp_path / "wiki_sample.txt", n=40)
    with_bad_byte(path, 21)
    message = user_error(["method=simcse", "dataset=wiki", f"data_dir={tmp_path}", *FAST], tmp_path / "run")
    assert "wiki_sample.txt' line 21 " in message and "dataset.encoding=latin-1" in message


def test_decode_error_line_in_a_large_file(tmp_path):
    from datamodules.text_decoding import iter_lines, locate_decode_error

    path = tmp_path / "big.txt"
    path.write_bytes(b"".join(b"sentence %d with some words in it\n" % i for i in range(5000)) + b"\xff\n")
    assert locate_decode_error(path)[:3] == (5001, 1, b"\xff")
    with pytest.raises(UserError, match=r"big.txt' line 5001 .*byte 0xff"):
        list(iter_lines(path))


def test_augment_cli_names_file_and_line_and_takes_encoding(tmp_path, capsys):
    from ctclust.commands.augment import main

    source = write_short_text_csv(tmp_path / "in.csv", header=("label", "text", "aug"))
    with_bad_byte(source, 3)
    with pytest.raises(SystemExit) as stopped:
        main([str(source), "--output", str(tmp_path / "out.csv"), "--method", "eda", "--no-progress"])
    err = capsys.readouterr().err
    assert stopped.value.code == 2
    assert err.startswith("error: ") and "in.csv' line 3" in err and "--encoding latin-1" in err
    main([str(source), "--output", str(tmp_path / "out.csv"), "--method", "eda", "--no-progress",
          "--operations", "rs", "--encoding", "latin-1"])  # random swaps: no WordNet to load
    assert "café au lait" in (tmp_path / "out.csv").read_text(encoding="utf-8")


# -- settings that make training meaningless ------------------------------------------------------------
@pytest.mark.parametrize(
    "override,fragments",
    [
        ("batch_size=0", ["batch_size=0", "set batch_size=64"]),
        ("batch_size=1", ["batch_size=1", "identically 0", "batch_size=2 or more"]),
        ("method.lr=-1e-05", ["method.lr=-1e-05", "> 0", "climbs the loss"]),
        ("method.head_lr_multiplier=0", ["method.head_lr_multiplier=0", "> 0"]),
        ("+method.optimizer.lr=-0.1", ["method.optimizer.lr=-0.1", "> 0"]),
        ("max_length=0", ["max_length=0", ">= 1", "max_length=32"]),
        ("dataset.num_clusters=1", ["dataset.num_clusters=1", "K >= 2"]),
        ("method.temperature=0", ["method.temperature=0", "> 0"]),
        ("trainer.max_epochs=-1", ["trainer.max_steps=-1 and trainer.max_epochs=-1", "never end"]),
        ("trainer.max_steps=0", ["trainer.max_steps=0", "nothing would be trained"]),
        ("float32_matmul_precision=fast", ["float32_matmul_precision=fast", "highest, high, medium"]),
    ],
)
def test_meaningless_settings_are_refused(override, fragments, tmp_path):
    overrides = tiny_csv(tmp_path) + [override]
    if override == "trainer.max_epochs=-1":
        overrides.append("trainer.max_steps=-1")
    message = user_error(overrides, tmp_path / "run")
    for fragment in fragments:
        assert fragment in message, message
    assert not (tmp_path / "run" / "config_resolved.yaml").exists()  # refused before any work


def test_clusterns_k_larger_than_the_global_batch(tmp_path):
    write_wiki(tmp_path / "wiki_sample.txt")
    message = user_error(["method=clusterns", "dataset=wiki", f"data_dir={tmp_path}", "batch_size=16",
                          "trainer.devices=1", *FAST], tmp_path / "run")
    assert "method.num_clusters=32" in message and "global batch is 16 (batch_size=16 x 1 device(s)" in message
    assert "Lower method.num_clusters to <= 16" in message


def test_clusterns_k_check_counts_devices_and_nodes():
    assert validation.devices_count(4) == 4 and validation.devices_count([0, 1]) == 2
    assert validation.devices_count("0,1,2") == 3 and validation.devices_count("auto") is None
    assert validation.devices_count(-1) is None and validation.devices_count("2") == 2


# -- data --------------------------------------------------------------------------------------------
def test_rows_without_any_text_are_dropped_with_their_file_lines(tmp_path):
    from datamodules.short_text import ShortTextDataModule

    path = tmp_path / "holes.csv"
    path.write_text('label,text0,text1\na,first,first aug\nb,,\nb,"second\nspans two lines",x\na,  ,\t\n'
                    "b,,only aug\na,third,\n", encoding="utf-8")
    with pytest.warns(UserWarning, match=r"holes.csv: dropped 2 row\(s\) with no text .*file lines 3, 6\)"):
        dm = ShortTextDataModule(str(tmp_path), "holes.csv", text_column="text0", aug_columns=["text1"],
                                 augmentation="explicit", num_clusters=2, loader=LOADER)
        dm.setup()
    assert dm.texts == ["first", "second\nspans two lines", "only aug", "third"]
    assert dm.lines == [2, 4, 7, 8] and list(dm.labels) == ["a", "b", "b", "a"]


def test_file_without_any_text(tmp_path):
    (tmp_path / "empty_texts.csv").write_text("label,text\na,\nb,  \n", encoding="utf-8")
    message = user_error(["dataset=csv", f"data_dir={tmp_path}", "dataset.file=empty_texts.csv", *FAST],
                         tmp_path / "run")
    assert "empty_texts.csv' has no text in column 'text'" in message and "dataset.text_column" in message


def test_predictions_map_back_to_file_lines(tmp_path):
    from ctclust.training.train import train

    overrides = tiny_csv(tmp_path)
    path = tmp_path / "texts.csv"
    lines = path.read_text(encoding="utf-8").splitlines()
    lines.insert(3, "food,,")  # a row without text on file line 4
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    with pytest.warns(UserWarning, match="file lines 4"):
        train(compose_config(overrides, tmp_path / "run"))
    import csv

    with open(tmp_path / "run" / "predictions.csv", encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    file_lines = path.read_text(encoding="utf-8").splitlines()
    assert len(rows) == len(file_lines) - 2  # header and the empty row are not predicted
    for row in rows:
        assert file_lines[int(row["line"]) - 1].split(",")[1] == row["text"]


def test_streaming_nli_without_usable_pairs_stops_at_set_up(tmp_path):
    write_nli(tmp_path / "nli_sample.csv", n=10, labels=("neutral",))
    overrides = ["method=pairsupcon", "dataset=nli", f"data_dir={tmp_path}", *FAST]
    for streaming in ("false", "true"):
        message = user_error(overrides + [f"dataset.streaming={streaming}"], tmp_path / f"run_{streaming}")
        assert "nli_sample.csv' has no entailment or contradiction pairs" in message and "dataset.file" in message


def test_an_epoch_without_batches_stops_the_run(tmp_path, monkeypatch):
    """The guard behind the set-up check: a data source that yields nothing in an epoch."""
    from datamodules import nli

    write_nli(tmp_path / "nli_sample.csv", n=10, labels=("neutral",))
    monkeypatch.setattr(nli, "has_pairs", lambda *args, **kwargs: True)  # get past the set-up check
    message = user_error(["method=pairsupcon", "dataset=nli", f"data_dir={tmp_path}", "dataset.streaming=true",
                          f"sts_data_dir={write_stsb(tmp_path / 'sts')}", *FAST, "trainer.max_steps=5"],
                         tmp_path / "run")
    assert "epoch 0 produced no training batch: '" in message and "nli_sample.csv' yielded no usable item" in message


def test_fewer_texts_than_a_batch_with_drop_last(tmp_path):
    message = user_error(tiny_csv(tmp_path) + ["+dataset.drop_last=true"], tmp_path / "run")
    assert "has 40 texts, fewer than batch_size=64" in message and "dataset.drop_last=false" in message


# -- checkpoints -------------------------------------------------------------------------------------
def fake_checkpoint(path: Path, **extra) -> Path:
    torch.save({"state_dict": {}, "optimizer_states": [], "pytorch-lightning_version": "2.6.0", "global_step": 3,
                **extra}, path)
    return path


def test_missing_checkpoint_and_folder(tmp_path):
    message = user_error(tiny_csv(tmp_path) + [f"ckpt_path={tmp_path / 'nope.ckpt'}"], tmp_path / "run")
    assert f"ckpt_path={tmp_path / 'nope.ckpt'} does not exist" in message and "drop ckpt_path" in message
    message = user_error(tiny_csv(tmp_path) + [f"ckpt_path={tmp_path}"], tmp_path / "run2")
    assert "is a folder; give the checkpoint file itself" in message


@pytest.mark.parametrize("damage", ["truncated", "garbage", "empty"])
def test_corrupted_checkpoint(tmp_path, damage):
    path = fake_checkpoint(tmp_path / "last.ckpt", hyper_parameters={"backbone": "tiny", "num_clusters": 4})
    data = path.read_bytes()
    path.write_bytes({"truncated": data[: len(data) // 2], "garbage": b"not a checkpoint" * 50, "empty": b""}[damage])
    message = user_error(tiny_csv(tmp_path) + [f"ckpt_path={path}"], tmp_path / "run")
    assert f"ckpt_path={path} is not a readable checkpoint" in message and "truncated or corrupted" in message


def test_checkpoint_of_another_method_names_it(tmp_path):
    path = fake_checkpoint(tmp_path / "sccl.ckpt", module_class="lightning_modules.sccl.SCCL",
                           hyper_parameters={"backbone": "tiny", "num_clusters": 4})
    write_wiki(tmp_path / "wiki_sample.txt")
    message = user_error(["method=clusterns", "dataset=wiki", f"data_dir={tmp_path}", f"ckpt_path={path}", *FAST],
                         tmp_path / "run")
    assert "was written by method 'sccl' (lightning_modules.sccl.SCCL), but this run is method=clusterns" in message
    assert "Resume it with `method=sccl`" in message


def test_weights_only_checkpoint_cannot_be_resumed(tmp_path):
    path = tmp_path / "best.ckpt"
    torch.save({"state_dict": {}, "pytorch-lightning_version": "2.6.0", "module_class": "lightning_modules.sccl.SCCL",
                "hyper_parameters": {"backbone": "tiny", "num_clusters": 4}}, path)
    message = user_error(tiny_csv(tmp_path) + [f"ckpt_path={path}"], tmp_path / "run")
    assert "holds the weights only" in message and "checkpoints/last.ckpt" in message
    assert f"python tools.py evaluate --model {path}" in message


def test_checkpoint_method_inferred_from_hyper_parameters():
    """Checkpoints without a recorded class (older runs, copied away from their run folder)."""
    from lightning_modules.sccl.module import SCCL

    hparams = dict(SCCL(num_clusters=3, backbone="tiny", chunk_tokens=CHUNKS).hparams)
    assert validation.infer_class(set(hparams)) == "lightning_modules.sccl.SCCL"
    assert validation.infer_class({"backbone", "lr"}) is None


def test_checkpoint_with_another_backbone_or_k(tmp_path):
    path = fake_checkpoint(tmp_path / "a.ckpt", module_class="lightning_modules.sccl.SCCL",
                           hyper_parameters={"backbone": "minilm", "num_clusters": 4})
    message = user_error(tiny_csv(tmp_path) + [f"ckpt_path={path}"], tmp_path / "run")
    assert "trained with backbone 'minilm', but this run builds 'tiny'" in message
    path = fake_checkpoint(tmp_path / "b.ckpt", module_class="lightning_modules.sccl.SCCL",
                           hyper_parameters={"backbone": "tiny", "num_clusters": 7})
    message = user_error(tiny_csv(tmp_path) + [f"ckpt_path={path}"], tmp_path / "run2")
    assert "has K=7 clusters, but this run has K=4" in message and "dataset.num_clusters=7" in message


# -- output ------------------------------------------------------------------------------------------
def test_output_folder_not_writable(tmp_path):
    blocker = tmp_path / "a_file"
    blocker.write_text("x")
    message = user_error(tiny_csv(tmp_path), blocker / "run")
    assert f"the run folder '{blocker / 'run'}' cannot be written" in message and "hydra.run.dir=" in message


def test_a_folder_with_an_earlier_run_is_continued_only_with_ckpt_path(tmp_path):
    """A new run would replace the checkpoint and results.json of the run that wrote the folder before."""
    out = tmp_path / "run"
    out.mkdir()
    (out / "results.json").write_text(json.dumps({"status": "finished"}))
    message = user_error(tiny_csv(tmp_path), out)
    assert f"the run folder '{out}' holds an earlier run (results.json (status finished))" in message
    assert "ckpt_path=<its checkpoint>" in message and "hydra.run.dir=<folder>" in message
    assert not (out / "run.lock").exists()  # refused: the lock it took is given back


def test_a_requeued_job_starts_again_over_its_attempt_that_left_no_checkpoint(tmp_path, monkeypatch):
    """SLURM requeued the job before its first checkpoint (no requeue record): the folder is the same run's."""
    from ctclust.training import lifecycle
    from ctclust.training.train import train

    monkeypatch.setattr(lifecycle, "restart_count", lambda: 1)
    out = tmp_path / "run"
    out.mkdir()
    (out / "results.json").write_text(json.dumps({"status": "interrupted", "checkpoint": None}))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        train(compose_config(tiny_csv(tmp_path), out))
    assert json.loads((out / "results.json").read_text())["status"] == "finished"


REFUSALS = {errno.EPERM: "Operation not permitted", errno.EACCES: "Permission denied",
            errno.EROFS: "Read-only file system"}


def refuse_under(monkeypatch, prefix: Path, code: int) -> None:
    """Creating a folder under ``prefix`` fails with ``code``, as an NFS root squash (EPERM), a folder without
    permission (EACCES) or a read-only mount (EROFS) would: root ignores permission bits, so they are simulated."""
    real_mkdir = os.mkdir

    def mkdir(path, *args, **kwargs):
        if str(path).startswith(str(prefix)):
            raise PermissionError(code, REFUSALS[code], str(path)) if code != errno.EROFS \
                else OSError(code, REFUSALS[code], str(path))
        return real_mkdir(path, *args, **kwargs)

    monkeypatch.setattr(os, "mkdir", mkdir)


@pytest.mark.parametrize("code", sorted(REFUSALS), ids=errno.errorcode.get)
def test_a_run_folder_the_system_refuses_is_one_line(tmp_path, monkeypatch, capsys, code):
    """Hydra creates hydra.run.dir before run.py's main; the folder check before it names the folder and the key
    with the same words for EPERM as for EACCES and EROFS."""
    from omegaconf import OmegaConf

    from launching.hydra_callbacks import OutputFolderCheck
    from textcore.errors import ENVIRONMENT_ERRNOS

    refused = tmp_path / "mount"
    refuse_under(monkeypatch, refused, code)
    config = OmegaConf.create({"hydra": {"run": {"dir": str(refused / "run")}}})
    with pytest.raises(SystemExit) as stopped:
        OutputFolderCheck().on_run_start(config)
    assert stopped.value.code == USER_ERROR_EXIT_CODE
    [line] = capsys.readouterr().err.strip().splitlines()
    assert line.startswith(f"error: cannot create the run folder '{refused / 'run'}'")
    assert ENVIRONMENT_ERRNOS[code] in line and REFUSALS[code] in line and "hydra.run.dir=<folder>" in line


@pytest.mark.parametrize("code", sorted(REFUSALS), ids=errno.errorcode.get)
def test_a_write_the_system_refuses_is_one_line_wherever_raised(tmp_path, code):
    """An EPERM raised by code that does not name the key (a library's own mkdir) is the machine's state, as
    EACCES and EROFS are: one line with the file, not a traceback."""
    from textcore.errors import ENVIRONMENT_ERRNOS

    target = tmp_path / "out" / "results.json"
    error = find_user_error(_raised_from(OSError(code, REFUSALS[code], str(target))))
    assert error is not None, "a refused path must not end in a traceback"
    message = str(error)
    assert f"cannot write '{target}'" in message and ENVIRONMENT_ERRNOS[code] in message
    assert "Make the folder writable" in message and "hydra.run.dir=<folder>" in message and "\n" not in message
    assert find_user_error(PermissionError(errno.EPERM, "Operation not permitted")) is None  # os.kill's: no path


def _raised_from(cause: OSError) -> Exception:
    try:
        try:
            raise cause
        except OSError as err:
            raise RuntimeError("Error instantiating the logger") from err
    except RuntimeError as wrapped:
        return wrapped


@pytest.mark.slow
def test_run_py_console_for_a_run_folder_the_system_refuses(tmp_path):
    """The real entry point with os.mkdir refusing one folder (EPERM): exit 2 and one line, not Hydra's
    PermissionError traceback."""
    refused = tmp_path / "squashed"
    script = (
        "import errno, os, runpy, sys\n"
        "real = os.mkdir\n"
        "def mkdir(path, *a, **k):\n"
        f"    if str(path).startswith({str(refused)!r}):\n"
        "        raise PermissionError(errno.EPERM, 'Operation not permitted', str(path))\n"
        "    return real(path, *a, **k)\n"
        "os.mkdir = mkdir\n"
        "sys.argv = ['run.py', *sys.argv[1:]]\n"
        "runpy.run_path('run.py', run_name='__main__')\n"
    )
    proc = run_entry_point(["-c", script, f"hydra.run.dir={refused / 'run'}", *FAST])
    assert_one_error_line(proc, f"cannot create the run folder '{refused / 'run'}'", "does not permit writing",
                          "Operation not permitted", "hydra.run.dir=<folder>")


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full to simulate a full disk")
@pytest.mark.parametrize("name", ["config_resolved.yaml", "predictions.csv", "results.json"])
def test_disk_full_while_writing_outputs(tmp_path, monkeypatch, name):
    from tests.helpers.faults import fill_disk_for

    out = tmp_path / "run"
    out.mkdir()
    fill_disk_for(monkeypatch, out, name)
    message = user_error(tiny_csv(tmp_path), out)
    assert "the disk is full" in message and name in message and "write elsewhere" in message


# -- entry points as subprocesses: exit code 2, one line on stderr, no traceback --------------------------
@pytest.mark.slow
def test_run_py_console_for_a_bad_file(tmp_path):
    """Errors raised inside train() (settings, files, data, checkpoints: the in-process cases above) all
    reach the console through run.py's one handler; this checks the handler on one of them."""
    overrides = tiny_csv(tmp_path)
    with_bad_byte(tmp_path / "texts.csv", 5)
    proc = run_entry_point(["run.py", *overrides, f"hydra.run.dir={tmp_path / 'run'}"])
    assert_one_error_line(proc, "texts.csv' line 5", "dataset.encoding=latin-1")
    assert proc.stdout.strip() == ""  # the result table (stdout) is not printed for a failed run


@pytest.mark.slow
def test_run_py_console_for_an_unwritable_run_folder(tmp_path):
    blocker = tmp_path / "a_file"
    blocker.write_text("x")
    proc = run_entry_point(["run.py", f"hydra.run.dir={blocker / 'run'}", *FAST])
    assert_one_error_line(proc, f"cannot create the run folder '{blocker / 'run'}'", "is a file, not a folder",
                          "hydra.run.dir=<folder>")


def test_evaluate_model_with_a_path_that_does_not_exist(tmp_path):
    proc = run_entry_point(["-m", "ctclust.commands.evaluate",
                            "--model", str(tmp_path / "nonexistent"),
                            "--output", str(tmp_path / "out")])
    line = assert_one_error_line(proc, f"model '{tmp_path / 'nonexistent'}' does not exist")
    assert "backbone=" not in line and "Hub" not in line.split("Give")[0]
