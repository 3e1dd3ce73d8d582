"""The tools speak one language (ctclust/commands/common.py): every command of ``python tools.py``, read from its
own argparse parser, names one run folder ``--run`` (several: ``--runs``; any model reference, a run folder among
them: ``--model``), what it writes ``--output``, a list of training seeds ``--seeds`` and one seed ``--seed``; other
counts have their own names; and its ``--help`` shows every default."""
from __future__ import annotations

import argparse
import re

import pytest

from ctclust import tools
from ctclust.commands.common import ShowDefaults, seed_list
from tests.helpers.tool_parsers import sub_parsers, tool_parser

# what names a run folder: one, several, or any model reference (a run folder, a checkpoint, a Hub name, ...)
RUN_FOLDER_OPTIONS = ("--run", "--runs", "--model")
OTHER_OUTPUT_SPELLINGS = re.compile(r"^(--out(?!put$).*|--dest.*|-o|--save.*|--write.*)$")
OTHER_RUN_SPELLINGS = re.compile(r"^--(run|model)[-_]?(dir|folder|path)s?$")
SEED_OPTION = re.compile(r"seed")


def actions(parser: argparse.ArgumentParser) -> list[argparse.Action]:
    """The arguments of ``parser`` and its sub-commands, without help and sub-command actions."""
    return [a for p in sub_parsers(parser) for a in p._actions
            if not isinstance(a, (argparse._HelpAction, argparse._SubParsersAction))]


def help_of(parser: argparse.ArgumentParser, action: argparse.Action) -> str:
    """What ``--help`` prints for ``action``."""
    owner = next(p for p in sub_parsers(parser) if action in p._actions)
    formatter = owner._get_formatter()
    formatter.add_argument(action)
    return formatter.format_help()


def converted(action: argparse.Action, text: str):
    """What ``action`` makes of ``text`` on the command line (None when it refuses it)."""
    try:
        return (action.type or str)(text)
    except (ValueError, TypeError, argparse.ArgumentTypeError):
        return None


def worth_showing(default) -> bool:
    return not (default is None or default is False or default is argparse.SUPPRESS
                or (isinstance(default, (str, list, tuple)) and not default))


def problems(parsers: dict[str, argparse.ArgumentParser]) -> list[str]:
    """Every place where a tool spells the run folder, the output or the seeds otherwise, or hides a default."""
    found = []
    for name, parser in parsers.items():
        for action in actions(parser):
            where = f"{name} {'/'.join(action.option_strings) or action.dest}"
            options = action.option_strings
            if not options and re.search(r"run|path|folder", action.dest):
                found.append(f"{where}: a run folder is an option: --run (several: --runs)")
            for option in options:
                if OTHER_OUTPUT_SPELLINGS.match(option):
                    found.append(f"{where}: what a tool writes is --output")
                if OTHER_RUN_SPELLINGS.match(option):
                    found.append(f"{where}: a run folder is --run")
                if SEED_OPTION.search(option) and option not in ("--seed", "--seeds"):
                    found.append(f"{where}: seeds are --seeds (a list) or --seed (one); a count has its own name")
            if options and not set(options) & set(RUN_FOLDER_OPTIONS) and re.search(
                    r"\brun (folder|dir)", action.help or ""):
                found.append(f"{where}: names a run folder: --run (any model reference: --model)")
            if "--seeds" in options and converted(action, "0,1,2") != [0, 1, 2]:
                found.append(f"{where}: --seeds is a list of training seeds (type ctclust.commands.common.seed_list)")
            if "--seed" in options and converted(action, "3") != 3:
                found.append(f"{where}: --seed is one integer seed")
            if worth_showing(action.default) and "default" not in help_of(parser, action).lower():
                found.append(f"{where}: --help does not show its default {action.default!r}")
    return found


PARSERS = {name: tool_parser(name)[0] for name in tools.COMMANDS}


@pytest.mark.parametrize("name", list(tools.COMMANDS))
def test_a_tool_speaks_the_one_language(name):
    assert problems({name: PARSERS[name]}) == []


def test_across_the_tools_each_thing_has_one_spelling():
    """Run folder, output and seeds: the spellings used anywhere are the ones of the rule, and the tools that have
    them agree (every --seeds is a list of training seeds)."""
    spelled = {option for parser in PARSERS.values() for action in actions(parser) for option in action.option_strings}
    assert {"--run", "--output", "--seeds"} <= spelled
    assert not {o for o in spelled if OTHER_OUTPUT_SPELLINGS.match(o) or OTHER_RUN_SPELLINGS.match(o)}
    assert {o for o in spelled if SEED_OPTION.search(o)} <= {"--seed", "--seeds"}
    seeds = [a for parser in PARSERS.values() for a in actions(parser) if "--seeds" in a.option_strings]
    assert seeds and all("training" in a.help for a in seeds)


def test_the_check_finds_each_kind_of_drift():
    def tool(*arguments: tuple[tuple, dict], formatter=argparse.HelpFormatter) -> argparse.ArgumentParser:
        parser = argparse.ArgumentParser(prog="tool", formatter_class=formatter)
        for args, kwargs in arguments:
            parser.add_argument(*args, **kwargs)
        return parser

    drifted = {
        "a": tool((("run",), {"help": "run folder"}), (("--out",), {"help": "folder to write"})),
        "b": tool((("--seeds",), {"type": int, "default": 5, "help": "KMeans seeds (default 5)"}),
                  (("--n-seeds",), {"type": int, "help": "how many"})),
        "c": tool((("--input",), {"help": "a text file or a run folder"}),
                  (("--batch-size",), {"type": int, "default": 128})),
        "d": tool((("--run-dir",), {"help": "where"}), (("--dest",), {"help": "where to"})),
    }
    found = problems(drifted)
    for expected in ("a run: a run folder is an option", "a --out: what a tool writes is --output",
                     "b --seeds: --seeds is a list", "b --n-seeds: seeds are --seeds",
                     "c --input: names a run folder", "c --batch-size: --help does not show its default 128",
                     "d --run-dir: a run folder is --run", "d --dest: what a tool writes is --output"):
        assert any(line.startswith(expected) for line in found), (expected, found)
    tidy = tool((("--run",), {"help": "run folder"}), (("--output",), {"help": "folder to write"}),
                (("--seeds",), {"type": seed_list, "default": [0, 1], "help": "training seeds"}),
                (("--batch-size",), {"type": int, "default": 128, "help": "texts per batch"}),
                formatter=ShowDefaults)
    assert problems({"tidy": tidy}) == []
    assert "(default: 128)" in tidy.format_help() and "(default: [0, 1])" in tidy.format_help()


def test_show_defaults_says_each_default_once():
    parser = argparse.ArgumentParser(prog="tool", formatter_class=ShowDefaults)
    parser.add_argument("--k", default="2:60", help="a K range (default 2:60)")
    parser.add_argument("--model", default=None, help="any model")
    parser.add_argument("--html", action="store_true", help="also a page")
    text = " ".join(parser.format_help().split())
    assert "(default 2:60)" in text and "(default: 2:60)" not in text
    assert "(default: None)" not in text and "(default: False)" not in text


@pytest.mark.parametrize("text,seeds", [("0,1,2", [0, 1, 2]), ("5", [5]), ("3, 1", [3, 1])])
def test_seed_list(text, seeds):
    assert seed_list(text) == seeds


@pytest.mark.parametrize("text", ["0;1", "a", ",", ""])
def test_seed_list_refuses_what_is_not_a_list_of_integers(text):
    with pytest.raises(argparse.ArgumentTypeError, match="e.g. 0,1,2"):
        seed_list(text)
