"""The console of a run: each log line once, no adverts, the model summary without an all-zero column."""
from __future__ import annotations

import io
import logging
import warnings

import pytest

from textcore import console

LOGGERS = ("lightning", "lightning.pytorch", "lightning.fabric", "lightning.pytorch.utilities.rank_zero",
           "lightning.fabric.utilities.rank_zero")


@pytest.fixture
def hydra_like_root():
    """A root handler like Hydra's console handler; logging state restored afterwards."""
    import lightning  # noqa: F401 - attaches its own handler, as in a run

    saved = {name: (list(logging.getLogger(name).handlers), logging.getLogger(name).propagate,
                    list(logging.getLogger(name).filters)) for name in LOGGERS}
    stream = io.StringIO()  # the terminal: Hydra's handler and Lightning's own both write to it
    handler = logging.StreamHandler(stream)
    handler.setFormatter(logging.Formatter("%(name)s: %(message)s"))
    root = logging.getLogger()
    root.addHandler(handler)
    streams = {}
    for name in LOGGERS:
        for own in logging.getLogger(name).handlers:
            if type(own) is logging.StreamHandler:
                streams[own] = own.setStream(stream)
    yield stream
    root.removeHandler(handler)
    for own, previous in streams.items():
        own.setStream(previous)
    for name, (handlers, propagate, filters) in saved.items():
        logger = logging.getLogger(name)
        logger.handlers[:], logger.propagate, logger.filters[:] = handlers, propagate, filters


def emit_lightning_lines() -> None:
    from lightning.pytorch.utilities.rank_zero import rank_zero_info

    rank_zero_info("GPU available: False, used: False")
    rank_zero_info("💡 Tip: For seamless cloud logging and experiment tracking, try installing [litlogger](...)")
    logging.getLogger("lightning.fabric.utilities.seed").info("Seed set to 42")


def test_without_configure_lines_are_doubled_and_adverts_shown(hydra_like_root):
    """What a run printed before console.configure existed (the test below can fail)."""
    emit_lightning_lines()
    printed = hydra_like_root.getvalue()
    # lightning.pytorch propagates to its parents when a root handler existed at its import (a Hydra run)
    doubled = logging.getLogger("lightning.pytorch").propagate
    assert printed.count("GPU available: False") == (2 if doubled else 1) and "Tip" in printed


def test_lightning_lines_once_and_no_adverts(hydra_like_root, capfd):
    console.configure()
    emit_lightning_lines()
    printed = hydra_like_root.getvalue() + capfd.readouterr().err
    assert printed.count("GPU available: False") == 1 and printed.count("Seed set to 42") == 1
    assert "Tip" not in printed and "litlogger" not in printed


def test_without_a_root_handler_lightning_keeps_its_own(capfd):
    import lightning  # noqa: F401

    before = list(logging.getLogger("lightning").handlers)
    console.configure(root_handlers_present=False)
    assert logging.getLogger("lightning").handlers == before  # CLIs and tests still see Lightning's lines


def test_known_noise_warnings_are_hidden_and_others_are_not():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        console.quiet_warnings()
        warnings.warn("`isinstance(treespec, LeafSpec)` is deprecated, use ...", FutureWarning, stacklevel=1)
        warnings.warn("The 'train_dataloader' does not have many workers which may be a bottleneck.", stacklevel=1)
        warnings.warn("something the user must see", UserWarning, stacklevel=1)
    assert [str(w.message) for w in caught] == ["something the user must see"]


def test_model_summary_drops_the_zero_flops_column_and_goes_to_stderr(capsys):
    from callbacks.display.progress import CompactModelSummary

    data = [(" ", ["0", "1"]), ("Name", ["encoder", "head"]), ("Type", ["TextEncoder", "ContrastHead"]),
            ("Params", ["22.7 M", "197 K"]), ("Mode", ["train", "train"]), ("FLOPs", ["0", "0"])]
    CompactModelSummary.summarize(data, 22_900_000, 22_900_000, 91.6, {"train": 2, "eval": 0}, 0)
    out, err = capsys.readouterr()
    assert out == "" and "encoder" in err and "ContrastHead" in err and "Trainable params: 22.9 M" in err
    assert "FLOPs" not in err and "Non-trainable params: 0\n" in err
    CompactModelSummary.summarize(data[:-1] + [("FLOPs", ["1.2 G", "3 M"])], 10, 10, 0.1, {"train": 2, "eval": 0},
                                  1_200_000_000)
    assert "FLOPs" in capsys.readouterr().err  # a real count is shown


def test_the_result_table_and_the_results_path_go_to_stdout(capsys, tmp_path):
    """run.py's last lines on stdout: the before/after table and where results.json is."""
    from ctclust.training.results import print_results

    results = {"method": "sccl", "dataset": "demo", "backbone": "tiny", "steps": 5, "output_dir": str(tmp_path),
               "clustering": {"before": {"kmeans_acc": 0.5, "kmeans_nmi": 0.25},
                              "final": {"kmeans_acc": 0.75, "kmeans_nmi": 0.5, "head_acc": 0.625}}}
    print_results(results)
    out = capsys.readouterr().out
    assert "sccl on demo (tiny, 5 steps)" in out and "75.00" in out and "62.50" in out
    assert f"results: {tmp_path / 'results.json'}" in out.replace("\n", "")
