"""The training loop never waits for the host between logging steps.

On a GPU, every read of a tensor's value by Python (``item``, ``tolist``, ``bool(t)``, ``float(t)``, ``cpu``,
``numpy``, ``torch.equal``) and every data-dependent shape (a boolean-mask index, ``nonzero``, ``unique``)
stops the CPU until the GPU has caught up, and the next kernels are queued late. So does the other direction,
a Python number put on the GPU: ``self.log(name, 1.0)`` makes a device tensor of it at every call (CUDA's own
count on an H100 found it), so a Python number logged outside a logging step counts too. On the CPU these calls cost
nothing, but they are the same calls: this test wraps them during ``Trainer.fit`` with the tiny backbone,
counts those made from code outside torch's own package (the project, Lightning, transformers; each counted
by the file that called), and expects none in a step that neither logs (every ``log_every_n_steps``) nor
evaluates, for every method.

What is counted: calls whose calling frame is not inside the ``torch`` package; torch's internal reads (e.g. its
optimizer's) are torch's business. Transformers' calls would be counted like any other; its BERT builds the
attention mask without reading it when the mask is given in the form its SDPA path takes (the encoder does).
A step's window runs from its ``on_train_batch_start`` to the next one's, so it holds the step's callbacks,
logging and the optimizer step.
"""
from __future__ import annotations

import contextlib
import sys
from pathlib import Path

import pytest
import torch
import torch.utils.data
from lightning.pytorch.callbacks import Callback

TORCH_DIR = str(Path(torch.__file__).resolve().parent)
DATA_LOADING = str(Path(torch.utils.data.__file__).resolve().parent)
VALUE_READS = ("item", "tolist", "__bool__", "__int__", "__float__", "__index__", "cpu", "numpy", "nonzero",
               "unique")
FUNCTION_READS = ("equal", "allclose", "nonzero", "unique", "masked_select")


class HostReads:
    """Counts value reads by caller file and training step (``step`` is set by :class:`StepMarker`)."""

    def __init__(self):
        self.step: int | None = None
        self.calls: list[tuple[int | None, str, str]] = []  # (step, what, caller "file:line")

    def record(self, what: str, depth: int = 2) -> None:
        if self.step is None:
            return
        frame = sys._getframe(depth)
        filename = str(Path(frame.f_code.co_filename).resolve())
        if filename.startswith(TORCH_DIR) or _loading_data(frame):
            return
        self.calls.append((self.step, what, f"{filename}:{frame.f_lineno}"))

    def in_step(self, step: int) -> list[tuple[str, str]]:
        return [(what, where) for s, what, where in self.calls if s == step]

    @contextlib.contextmanager
    def wrapped(self):
        saved = []

        def patch(owner, name, label):
            original = getattr(owner, name)
            saved.append((owner, name, original))

            def wrapper(*args, **kwargs):
                self.record(label)
                return original(*args, **kwargs)

            setattr(owner, name, wrapper)

        for name in VALUE_READS:
            patch(torch.Tensor, name, f"Tensor.{name}")
        for name in FUNCTION_READS:
            patch(torch, name, f"torch.{name}")
        original_getitem = torch.Tensor.__getitem__
        saved.append((torch.Tensor, "__getitem__", original_getitem))

        def getitem(tensor, index):
            parts = index if isinstance(index, tuple) else (index,)
            if any(isinstance(p, torch.Tensor) and p.dtype == torch.bool for p in parts):
                self.record("boolean-mask index")
            return original_getitem(tensor, index)

        torch.Tensor.__getitem__ = getitem
        from lightning.pytorch import LightningModule

        original_log = LightningModule.log
        saved.append((LightningModule, "log", original_log))

        def log(module, name, value, *args, **kwargs):
            if not isinstance(value, torch.Tensor):
                self.record(f"log of a Python number ({name})")
            return original_log(module, name, value, *args, **kwargs)

        LightningModule.log = log
        try:
            yield self
        finally:
            for owner, name, original in reversed(saved):
                setattr(owner, name, original)


def _loading_data(frame) -> bool:
    """Whether a DataLoader called this (a collator, a sampler): host data on the host, in a worker process
    on a GPU run."""
    while frame is not None:
        if str(Path(frame.f_code.co_filename).resolve()).startswith(DATA_LOADING):
            return True
        frame = frame.f_back
    return False


class StepMarker(Callback):
    """Tells :class:`HostReads` which training step runs (first in the callback list). Epoch boundaries are
    not a step's: what runs once an epoch (AECL's pseudo-labels) is left out."""

    def __init__(self, reads: HostReads):
        self.reads = reads

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx):
        self.reads.step = trainer.global_step

    def on_train_epoch_end(self, trainer, pl_module):
        self.reads.step = None

    def on_train_end(self, trainer, pl_module):
        self.reads.step = None


STEPS, LOG_EVERY = 9, 4
QUIET = [f"trainer.max_steps={STEPS}", f"trainer.log_every_n_steps={LOG_EVERY}", "trainer.enable_progress_bar=false",
         "~callbacks.progress", "~callbacks.report", "print_table=false", "callbacks.checkpoint.every_n_steps=0",
         "callbacks.checkpoint.every_n_minutes=0", "callbacks.checkpoint.save_final=false"]


def logging_step(step: int) -> bool:
    """Lightning writes the logged values when (step + 1) is a multiple of log_every_n_steps, and at the last step."""
    return (step + 1) % LOG_EVERY == 0 or step == STEPS - 1


def fit_and_count(overrides: list[str], out: Path, monkeypatch) -> HostReads:
    from ctclust.training import builders, train
    from tests.helpers import compose_config

    reads = HostReads()
    build = builders.instantiate_callbacks
    monkeypatch.setattr(train, "instantiate_callbacks", lambda cfg: [StepMarker(reads)] + build(cfg))
    cfg = compose_config(overrides + QUIET, out)
    with reads.wrapped():
        train.train(cfg)
    return reads


def quiet_steps_reads(reads: HostReads, skip: tuple[int, ...] = ()) -> dict[int, list]:
    return {step: reads.in_step(step) for step in range(STEPS)
            if not logging_step(step) and step not in skip and reads.in_step(step)}


def short_text_overrides(csv: Path) -> list[str]:
    from tests.helpers import toy_overrides

    dropped = ("trainer.max_steps", "trainer.log_every_n_steps", "dataset.callbacks.clustering_eval.every_n_steps",
               "~callbacks.progress", "trainer.enable_progress_bar")
    return [o for o in toy_overrides(csv) if not o.startswith(dropped)] + [
        "dataset.callbacks.clustering_eval.every_n_steps=1000"]


def test_sccl_reads_no_value_between_logging_steps(toy_corpus, tmp_path, monkeypatch):
    reads = fit_and_count(short_text_overrides(toy_corpus), tmp_path / "run", monkeypatch)
    assert quiet_steps_reads(reads) == {}
    assert any(reads.in_step(step) for step in range(STEPS) if logging_step(step)), "the counter saw nothing"


@pytest.mark.parametrize("stage", [1, 2, 3])
def test_aecl_reads_no_value_between_logging_steps_in_every_stage(toy_corpus, tmp_path, monkeypatch, stage):
    # batch 12 on 36 texts: 3 steps an epoch; e1/e2 put the whole run in one stage
    e1, e2 = {1: (10, 1), 2: (0, 10), 3: (0, 0)}[stage]
    overrides = [o for o in short_text_overrides(toy_corpus) if not o.startswith(("batch_size", "method.callbacks"))]
    overrides += ["method=aecl", "batch_size=12", f"method.e1={e1}", f"method.e2={e2}",
                  "method.callbacks.stage_switch.kmeans_n_init=2", "trainer.max_epochs=-1"]
    reads = fit_and_count(overrides, tmp_path / "run", monkeypatch)
    assert quiet_steps_reads(reads) == {}


def sentence_overrides(tmp_path: Path, method: str) -> list[str]:
    from tests.helpers import write_wiki_and_stsb

    wiki, sts = write_wiki_and_stsb(tmp_path)
    extra = ["method.num_clusters=4", "method.kmean_cosine=1.0"] if method == "clusterns" else []
    return [f"method={method}", "dataset=wiki", "backbone=tiny", f"data_dir={tmp_path}", f"dataset.path={wiki}",
            f"sts_data_dir={sts}", "batch_size=8", "method.callbacks.sts_selection.every_n_steps=1000",
            "trainer.enable_model_summary=false", *extra]


@pytest.mark.filterwarnings("ignore::UserWarning")
@pytest.mark.parametrize("method", ["simcse", "clusterns"])
def test_sentence_methods_read_no_value_between_logging_steps(tmp_path, monkeypatch, method):
    reads = fit_and_count(sentence_overrides(tmp_path, method), tmp_path / "run", monkeypatch)
    # kmean_cosine=1.0 starts ClusterNS's clustering at step 0 (a one-off: the centroids are initialised, logged);
    # every later step clusters
    assert quiet_steps_reads(reads, skip=(0,) if method == "clusterns" else ()) == {}


@pytest.mark.filterwarnings("ignore::UserWarning")
def test_pairsupcon_reads_no_value_between_logging_steps(tmp_path, monkeypatch):
    from tests.helpers.data_files import write_csv

    pairs = [[f"a person number {i} walks", f"someone {i} is walking" if i % 2 else f"nobody {i} moves",
              "entailment" if i % 2 else "contradiction"] for i in range(40)]
    nli = write_csv(tmp_path / "nli.csv", ["sentence1", "sentence2", "gold_label"], pairs)
    from tests.helpers import write_wiki_and_stsb

    _, sts = write_wiki_and_stsb(tmp_path)
    overrides = ["method=pairsupcon", "dataset=nli", "backbone=tiny", f"data_dir={tmp_path}",
                 f"dataset.file={nli.name}", "batch_size=8", f"sts_data_dir={sts}",
                 "trainer.enable_model_summary=false"]
    reads = fit_and_count(overrides, tmp_path / "run", monkeypatch)
    assert quiet_steps_reads(reads) == {}


def test_the_counter_sees_a_read_from_project_code_and_not_from_torch():
    reads = HostReads()
    reads.step = 0
    with reads.wrapped():
        value = torch.tensor([1.0, 2.0])
        value.sum().item()
        bool(value.all())
        value[value > 1]
        torch.nn.functional.cross_entropy(torch.zeros(2, 3), torch.tensor([0, 1]))  # torch's own code: not counted
    assert [what for what, _ in reads.in_step(0)] == ["Tensor.item", "Tensor.__bool__", "boolean-mask index"]
    assert all(where.startswith(__file__) for _, where in reads.in_step(0))


@pytest.mark.parametrize("implementation", ["sdpa", "eager"])
def test_the_masks_given_to_the_backbone_embed_as_transformers_own_mask(implementation):
    """The [B, 1, 1, T] mask (and no mask for rows without padding) that spares transformers its read of the
    mask gives the embeddings of the plain [B, T] mask, in both attention implementations."""
    from textcore.encoding.encoder import EncoderSettings, TextEncoder
    from textcore.encoding.token_batches import with_token_counts

    encoder = TextEncoder.from_name("tiny", EncoderSettings.outside_training()).eval()
    encoder.backbone.config._attn_implementation = implementation
    texts = ["a short one", "a somewhat longer text with more words in it", "mid length text here"]
    tokens = encoder.tokenize(texts)
    with torch.no_grad():
        plain = encoder.backbone(**tokens).last_hidden_state  # transformers builds its own mask
        ours = encoder(**with_token_counts(tokens), pooling="cls_before_pooler")
        full = encoder.tokenize(texts[:1])  # one row: no padding, no mask at all
        alone = encoder(**with_token_counts(full), pooling="cls_before_pooler")
    torch.testing.assert_close(ours, plain[:, 0], rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(alone, encoder.backbone(**full).last_hidden_state[:, 0], rtol=1e-5, atol=1e-6)
