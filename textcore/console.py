"""What a run prints: each log line once, on stderr, without third-party adverts or stale warnings.

``run.py`` calls :func:`configure` at the start of its Hydra ``main``, after Hydra has set up
logging (``conf/hydra/default.yaml``: console handler on stderr plus ``<run>/run.log``). Without it:

- every Lightning INFO line appears twice: ``import lightning`` attaches its own stderr handler to
  the ``lightning`` logger and leaves propagation on, so the record is printed by that handler
  and again by Hydra's root handlers;
- Lightning advertises other products ("Tip: ... try installing litlogger / litmodels") on every
  ``Trainer`` built without them;
- transformers draws a "Loading weights" progress bar for every backbone it loads;
- faiss logs at INFO, on import, each CPU extension it could not load;
- Lightning suggests ``torch.set_float32_matmul_precision`` on every GPU run with tensor cores, which
  the run has already set from ``float32_matmul_precision`` (``ctclust.training.builders``,
  :func:`hide_matmul_precision_hint`);
- Lightning 2.6 with torch >= 2.10 emits torch's FutureWarning about ``LeafSpec`` from its own
  batch-flattening code, once per run, which nothing in this project can act on.

The result table is printed on stdout (``ctclust.training.results``); logs, progress bars, warnings and errors go
to stderr, so ``python run.py ... > table.txt`` captures only the table.
"""
from __future__ import annotations

import logging
import sys
import warnings
from typing import Callable

# messages Lightning logs to advertise its commercial products (see its logger/callback connectors)
ADVERT_PREFIXES = ("💡 Tip:",)
_LIGHTNING_LOGGERS = ("lightning", "lightning.pytorch", "lightning.fabric", "pytorch_lightning", "lightning_fabric")
_RANK_ZERO_LOGGERS = ("lightning.pytorch.utilities.rank_zero", "lightning.fabric.utilities.rank_zero")
# every logger Lightning writes its device lines, tips and notes through
LIGHTNING_LOGGER_NAMES = _LIGHTNING_LOGGERS + _RANK_ZERO_LOGGERS


class DropAdverts(logging.Filter):
    """Drops log records that advertise other products."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        return not message.lstrip().startswith(ADVERT_PREFIXES)


class DropMatmulPrecisionHint(logging.Filter):
    """Drops Lightning's suggestion to call ``torch.set_float32_matmul_precision``."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "set_float32_matmul_precision" not in record.getMessage()


def _filter_lightning_loggers(kind: type[logging.Filter]) -> None:
    """One ``kind`` filter on every logger Lightning writes through (none added twice)."""
    instance = kind()
    for name in _RANK_ZERO_LOGGERS + _LIGHTNING_LOGGERS:
        logger = logging.getLogger(name)
        if not any(isinstance(f, kind) for f in logger.filters):
            logger.addFilter(instance)


def hide_matmul_precision_hint() -> None:
    """Call once the run has chosen the float32 matmul precision itself (``ctclust.training.builders``)."""
    _filter_lightning_loggers(DropMatmulPrecisionHint)


def quiet_warnings() -> None:
    """Warnings that are noise in this project's runs (each with the reason it is safe to hide)."""
    # our loaders are sized for the 2-core default; Lightning suggests more workers on every run
    warnings.filterwarnings("ignore", message=".*does not have many workers.*")
    # the streaming loaders compute their exact length per worker (EpochAwareLoader.__len__), which is
    # the case this Lightning warning is about
    warnings.filterwarnings("ignore", message=r".*Your `IterableDataset` has `__len__` defined.*")
    # torch deprecates LeafSpec; Lightning's own pytree helper still uses it (not our code)
    warnings.filterwarnings("ignore", message=r".*isinstance\(treespec, LeafSpec\).*", category=FutureWarning)


def configure(root_handlers_present: bool | None = None) -> None:
    """Route Lightning's logs through the root (Hydra) handlers once, drop adverts, hide noise.

    ``root_handlers_present`` defaults to whether the root logger has handlers (Hydra's); without
    them Lightning's own handler is the only output and is kept.
    """
    import lightning  # noqa: F401 - attaches its handlers on import; they are removed below

    _configure(root_handlers_present)


def configure_tool() -> None:
    """:func:`configure` for a command that has not imported Lightning or transformers, without importing them:
    a tool's ``--help`` answers at once (importing Lightning alone takes seconds). The result is the same:
    Lightning, imported later, sends its lines to the root handlers when there are some (``info_logs``) and
    keeps its own handler otherwise; transformers, imported later, starts with its bars off."""
    _configure(None)


def _configure(root_handlers_present: bool | None) -> None:
    if "lightning" in sys.modules:  # its handlers are attached on import: route them once
        if root_handlers_present is None:
            root_handlers_present = bool(logging.getLogger().handlers)
        for name in _LIGHTNING_LOGGERS:
            logger = logging.getLogger(name)
            if root_handlers_present:
                for handler in list(logger.handlers):
                    if type(handler) is logging.StreamHandler:  # not file handlers someone added on purpose
                        logger.removeHandler(handler)
                logger.propagate = True
    _filter_lightning_loggers(DropAdverts)
    quiet_warnings()
    # faiss (the KMeans backend) logs at INFO which CPU extensions it could not load, on every import
    logging.getLogger("faiss.loader").setLevel(logging.WARNING)
    try:
        from huggingface_hub.utils import disable_progress_bars, enable_progress_bars
    except ImportError:  # pragma: no cover - a dependency of transformers
        return
    if "transformers" in sys.modules:
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()  # transformers' own bars ("Loading weights")
        enable_progress_bars()  # ... but a first download of a Hub backbone keeps its progress bar
    else:
        # transformers takes its bars' state from the Hub's global one when it is imported; the Hub's own
        # download bars are named huggingface_hub.* and stay on
        disable_progress_bars()
        enable_progress_bars("huggingface_hub")


TOOLS = "python tools.py"  # how a user starts a tool: tools.py beside run.py (ctclust.tools)


def run_cli(main: Callable[[], object], info_logs: bool = False) -> None:
    """The tail of every tool (``python tools.py <command>`` and its ``python -m`` module): the quiet console of
    :func:`configure_tool` (with ``info_logs``, the command's own INFO lines on stderr, message only), then
    ``main()``. Its ``UserError`` becomes one line and exit status 2 through ``textcore.errors.exit_on_user_error`` on
    ``main``."""
    if info_logs:
        logging.basicConfig(level=logging.INFO, format="%(message)s")
    configure_tool()
    main()


def format_duration(seconds: float) -> str:
    """``1h02m``, ``4m05s``, ``12s``."""
    seconds = max(0, int(round(seconds)))
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours}h{minutes:02d}m" if hours else f"{minutes}m{secs:02d}s" if minutes else f"{secs}s"


class PhaseProgress:
    """Progress of one long phase (embedding a corpus, KMeans restarts, writing a file) as log lines, so that it
    shows in a terminal and in a scheduler's log file alike (the lines go through ``logging``: stderr and the run's
    ``run.log``)::

        embedding 20,000 of 1,000,000 texts (2%) · 9,870 texts/s · ETA 1m39s

    Nothing is written for a phase that ends within ``first_after`` seconds; then a line every ``every`` seconds,
    and one closing line (``... done in 1m41s``) when any line was written. The rate is the average since the
    phase began. When the units differ in cost (texts sorted by length: the last are the longest), ``total_work``
    and ``advance(n, work)`` (e.g. tokens) give the ETA from the work left instead of the units left.

    Use as a context manager, or call :meth:`close` at the end::

        with PhaseProgress("embedding", len(texts), "texts") as progress:
            for batch in batches:
                ...
                progress.advance(len(batch))
    """

    def __init__(self, what: str, total: int, unit: str = "texts", logger: logging.Logger | None = None,
                 every: float = 10.0, first_after: float = 5.0, clock: Callable[[], float] | None = None,
                 total_work: float | None = None, estimated: bool = False):
        import time

        if every <= 0 or first_after < 0:
            raise ValueError(f"every must be > 0 and first_after >= 0, got {every}, {first_after}")
        self.what, self.total, self.unit = what, max(int(total), 0), unit
        self.log = logger or logging.getLogger("progress")
        self.every, self.first_after = float(every), float(first_after)
        self.clock = clock or time.monotonic
        self.start = self.clock()
        self.done = 0
        self.total_work, self.work = total_work, 0.0
        self.estimated = estimated  # ``total`` is a guess (a file's rows from its size): shown as "~N"
        self._next_line = self.start + self.first_after
        self.lines = 0  # lines written so far

    def __enter__(self) -> "PhaseProgress":
        return self

    def __exit__(self, kind, value, traceback) -> None:
        if kind is None:
            self.close()

    def advance(self, n: int = 1, work: float | None = None) -> None:
        self.done += int(n)
        self.work += n if work is None else work
        now = self.clock()
        if now >= self._next_line and self.done < self.total:
            self.log.info(self.line(now))
            self.lines += 1
            self._next_line = now + self.every

    def line(self, now: float) -> str:
        """``<what> <done> of <total> <unit> (p%) · <rate> <unit>/s · ETA <t>``."""
        elapsed = max(now - self.start, 1e-9)
        rate = self.done / elapsed
        share = 100 * self.done / max(self.total, 1)
        total = f"{'~' if self.estimated else ''}{self.total:,}"
        parts = [f"{self.what} {self.done:,} of {total} {self.unit} ({share:.0f}%)"]
        if self.done:
            parts.append(f"{rate:,.0f} {self.unit}/s" if rate >= 10 else f"{rate:.2f} {self.unit}/s")
            if self.total_work and self.work:
                left = (self.total_work - self.work) / (self.work / elapsed)
            else:
                left = (self.total - self.done) / rate
            parts.append(f"ETA {format_duration(left)}")
        return " · ".join(parts)

    def close(self) -> float:
        """Seconds the phase took; a closing line when any progress line was written."""
        seconds = self.clock() - self.start
        if self.lines:
            self.log.info("%s: %s %s done in %s", self.what, f"{self.done:,}", self.unit, format_duration(seconds))
            self.lines = 0
        return seconds


# -- progress bars a notebook shows (the Python API's ``verbose``) -------------------------------------------------
_BARS = None  # a ContextVar, made on first use


def _bars_var():
    global _BARS
    if _BARS is None:
        from contextvars import ContextVar

        _BARS = ContextVar("ctclust_progress_bars", default=False)
    return _BARS


class show_bars:  # noqa: N801 - used as a function: ``with show_bars(True): ...``
    """Within the block, every pass over texts (:func:`text_bar`) draws a progress bar (tqdm's notebook-aware
    ``tqdm.auto``); outside, none does (commands write :class:`PhaseProgress` lines instead)."""

    def __init__(self, enabled: bool):
        self.enabled = bool(enabled)
        self._token = None

    def __enter__(self) -> "show_bars":
        self._token = _bars_var().set(self.enabled)
        return self

    def __exit__(self, *exc) -> None:
        _bars_var().reset(self._token)


class _NoBar:
    def __enter__(self) -> "_NoBar":
        return self

    def __exit__(self, *exc) -> None:
        return None

    def update(self, n: int = 1) -> None:
        return None


def text_bar(total: int, what: str = "embedding"):
    """A progress bar of ``total`` texts when :class:`show_bars` is on (a context manager with ``update(n)``), else
    one that draws nothing."""
    if not _bars_var().get():
        return _NoBar()
    from tqdm.auto import tqdm

    return tqdm(total=total, desc=what, unit=" texts", leave=False, dynamic_ncols=True)
