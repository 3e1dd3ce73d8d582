"""The project's tools in one command: ``python tools.py <command> [options]``; training is ``python run.py``.

Each command is named by what it does and runs the ``main`` of its module in ``ctclust/commands/`` (which also runs
as ``python -m ctclust.commands.<name>``): ``python tools.py`` lists them, ``python tools.py <command> --help`` gives
a command's options.
A command imports torch, Lightning and transformers only once it needs them, so the lists and ``--help``
answer at once and ``download`` without network says what to fetch without loading a model library.
"""
from __future__ import annotations

import difflib
import importlib
import sys
from typing import NamedTuple, Sequence

from textcore import console

PROG = console.TOOLS


class Command(NamedTuple):
    module: str  # its main(argv) does the work
    summary: str
    info_logs: bool = False  # the module's own INFO lines on stderr (console.run_cli)


# in the order a user meets them: data, then a model on benchmarks, then a run, then many runs
COMMANDS = {
    "download": Command("ctclust.commands.download", "fetch the benchmark data (offline: what to fetch and where)"),
    "prepare": Command("ctclust.commands.prepare", "the authors' preparation: PairSupCon's NLI pairs"),
    "augment": Command("ctclust.commands.augment", "add augmented columns (EDA, contextual) to a text table"),
    "evaluate": Command("ctclust.commands.evaluate",
                        "a model on clustering, STS, transfer, few-shot, MTEB; compare result files"),
    "sts": Command("ctclust.commands.sts", "a model on the STS tasks alone"),
    "transfer": Command("ctclust.commands.transfer", "a model on the SentEval transfer tasks alone"),
    "choose-k": Command("ctclust.commands.choose_k", "the number of clusters, without labels"),
    "predict": Command("ctclust.commands.predict", "assign new texts to a run's clusters", info_logs=True),
    "export": Command("ctclust.commands.export", "a run's encoder as sentence-transformers and Hub folders"),
    "describe": Command("ctclust.commands.describe",
                        "what each cluster of a run is about (--html: a page)",
                        info_logs=True),
    "plots": Command("ctclust.commands.plots", "a run's embedding maps, confusion matrix, training curves",
                     info_logs=True),
    "aggregate": Command("ctclust.commands.aggregate",
                         "one table from many runs: mean and std over seeds"),
    "paper-table": Command("ctclust.commands.paper_table", "a paper's published table beside your runs"),
    "reproduce": Command("ctclust.commands.reproduce", "one paper table: check the data, run every row, compare"),
}


def usage() -> str:
    width = max(map(len, COMMANDS))
    lines = [f"usage: {PROG} <command> [options]     ({PROG} <command> --help: its options)", "",
             "Training is `python run.py` (README.md); after `pip install -e .` the same two commands are",
             "`ctclust-train` and `ctclust-tools`, from any folder. The commands:", ""]
    lines += [f"  {name:<{width}}  {command.summary}" for name, command in COMMANDS.items()]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> None:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help", "help"):
        print(usage())
        return
    name, rest = argv[0], argv[1:]
    command = COMMANDS.get(name)
    if command is None:
        close = difflib.get_close_matches(name, COMMANDS, n=1)
        hint = f"did you mean '{close[0]}'? " if close else ""
        print(f"error: {PROG} has no command '{name}'; {hint}the commands: {', '.join(COMMANDS)}.", file=sys.stderr)
        sys.exit(2)
    module = importlib.import_module(command.module)
    console.run_cli(lambda: module.main(rest), info_logs=command.info_logs)


if __name__ == "__main__":
    main()
