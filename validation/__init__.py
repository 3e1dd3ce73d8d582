"""Checks of a run before any work is done: one place, one message per problem.

A training run (``ctclust.training.train``) calls, in this order:

1. :func:`validate` (pure: the composed configuration only) — the method trains on this kind of
   dataset, batch size >= 2, learning rates > 0, max_length >= 1, temperatures > 0, K >= 2,
   ClusterNS's K <= the global batch, a step or epoch budget, a known text encoding;
2. :func:`check_corpus`, :func:`check_output_dir` and :func:`check_checkpoint` — a corpus of the download
   catalogue is there (else one line naming its URL and download command; ``dataset.sample=true`` switches
   to the dataset's sample), the run folder can be written, and
   ``ckpt_path`` exists, is a readable Lightning checkpoint, was written by the configured method
   and with the configured backbone;
3. :func:`check_data`, after ``datamodule.setup`` and before the model (and its backbone) is built
   — enough texts, K <= distinct texts, the checkpoint's K equals the data's.

Each failure raises a :class:`textcore.errors.UserError` subclass whose message names the key, its value
and the fix; entry points print it as one line without a traceback.

Which datasets a method trains on is what the classes say: a method's ``trains_on`` against a
datamodule's ``data_kind`` (SCCL and AECL cluster short texts; SimCSE and ClusterNS learn from
sentences and also run on short texts; PairSupCon needs NLI pairs). A method's own checks are its
``check_config`` and ``min_batch_size`` (``lightning_modules.shared.base``).

One module per step: ``settings`` (1), ``files`` and ``checkpoint`` (2), ``data`` (3); ``lookup`` reads
what a configuration names. The run folder's own check before Hydra creates it is a Hydra callback,
``launching.hydra_callbacks.OutputFolderCheck``.
"""
from validation.checkpoint import CheckpointError, check_checkpoint, checkpoint_class, infer_class, read_checkpoint
from validation.data import check_data
from validation.files import check_corpus, check_output_dir, corpus_path
from validation.lookup import datasets_for, method_names
from validation.settings import (
    MATMUL_PRECISIONS,
    TINY_POSITIONS,
    backbone_token_limit,
    check_accumulation,
    check_batch_size,
    check_budget,
    check_encoding,
    check_learning_rates,
    check_matmul_precision,
    check_max_length,
    check_method,
    check_num_clusters,
    check_pairing,
    check_temperatures,
    devices_count,
    validate,
)

__all__ = [
    "MATMUL_PRECISIONS", "TINY_POSITIONS", "CheckpointError", "backbone_token_limit",
    "check_accumulation", "check_batch_size", "check_budget", "check_checkpoint", "check_corpus", "check_data",
    "check_encoding", "check_learning_rates", "check_matmul_precision", "check_max_length", "check_method",
    "check_num_clusters", "check_output_dir", "check_pairing", "check_temperatures", "checkpoint_class",
    "corpus_path", "datasets_for", "devices_count", "infer_class", "method_names", "read_checkpoint", "validate",
]
