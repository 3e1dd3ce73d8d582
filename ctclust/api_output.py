"""What the Python API prints, in a notebook as in a terminal (``TextClusterer(verbose=...)``).

``verbose=True``: the training budget (one line, before training), Lightning's tqdm progress bar for training
(``tqdm.auto``: a widget in a notebook when ipywidgets is installed), a bar for every pass over the texts
(``textcore.console.text_bar``), and the result table. ``verbose=False``: nothing. Either way the lines a
notebook user cannot act on stay quiet: Lightning's device lines ("GPU available: ...") and product tips, its
INFO lines, and the known warnings of ``textcore.console.quiet_warnings``. A notebook has no logging handler, so
the project's own INFO lines (``PhaseProgress``) were never shown there; its warnings still are when verbose.
"""
from __future__ import annotations

import logging
import warnings
from contextlib import contextmanager


@contextmanager
def api_output(verbose: bool):
    """Within the block: Lightning's INFO lines off (WARNING and above stay when ``verbose``; ERROR only
    otherwise), known warnings hidden (all of them when not ``verbose``), progress bars of passes over texts on when
    ``verbose``."""
    from textcore import console

    loggers = [logging.getLogger(name) for name in console.LIGHTNING_LOGGER_NAMES]
    # the caller's logging, as it was: the block changes Lightning's loggers for its own time only
    saved = [(logger.level, list(logger.handlers), logger.propagate, list(logger.filters)) for logger in loggers]
    console.configure_tool()  # adverts dropped, transformers' loading bars off, Lightning's handler kept
    for logger in loggers:
        logger.setLevel(logging.WARNING if verbose else logging.ERROR)
    try:
        with warnings.catch_warnings(), console.show_bars(verbose):
            console.quiet_warnings()
            # a small corpus trains in fewer steps than a logging interval: nothing for the user to change
            warnings.filterwarnings("ignore", message=r".*smaller than the logging interval.*")
            if not verbose:
                warnings.simplefilter("ignore")
            yield
    finally:
        for logger, (level, handlers, propagate, filters) in zip(loggers, saved):
            logger.setLevel(level)
            logger.handlers[:] = handlers
            logger.propagate = propagate
            logger.filters[:] = filters


def print_budget(cfg, texts: int | None) -> None:
    """The training budget, one printed line: ``training sccl (minilm) on 720 texts: 24 steps (2 epochs) of 64 texts,
    K=8``; on a corpus large enough for ``trainer.max_steps``: ``... on 20,000 texts: 150 steps of 64 texts ...``."""
    from omegaconf import OmegaConf

    from validation.data import planned_steps

    steps = OmegaConf.select(cfg, "trainer.max_steps", default=None)
    epochs = OmegaConf.select(cfg, "trainer.max_epochs", default=None)
    budget = f"{steps} steps" if steps is not None and steps > 0 else f"{epochs} epochs"
    planned = planned_steps(cfg, texts) if texts else None
    if planned is not None and planned[0] < steps:  # a small corpus: the epochs end it first
        budget = f"{planned[0]} steps ({epochs} epochs)"
    k = OmegaConf.select(cfg, "dataset.num_clusters", default=None)
    k = "auto (chosen from the texts)" if k == "auto" else "the number of labels" if k is None else k
    corpus = f"{texts:,} texts" if texts is not None else OmegaConf.select(cfg, "dataset.file", default="the file")
    print(f"training {cfg.method.name} ({cfg.backbone.name}) on {corpus}: {budget} of "
          f"{OmegaConf.select(cfg, 'batch_size', default='?')} texts, K={k}; run folder {cfg.paths.output_dir}",
          flush=True)
