"""The argparse parser of each command of ``python tools.py``, taken where its ``main`` parses (nothing runs)."""
from __future__ import annotations

import argparse
import contextlib
import importlib
from unittest import mock

from ctclust import tools


class _Parsed(Exception):
    """Raised in place of parsing: the caller has the tool's parser."""


PARSE_METHODS = ("parse_args", "parse_known_args", "parse_intermixed_args", "parse_known_intermixed_args")


def tool_parser(name: str) -> tuple[argparse.ArgumentParser, str]:
    """The parser a tool's ``main`` builds and the method it parses with, taken at that call (so nothing runs)."""
    taken = []

    def taker(method):
        def take(self, *args, **kwargs):
            taken.append((self, method))
            raise _Parsed
        return take

    module = importlib.import_module(tools.COMMANDS[name].module)
    with contextlib.ExitStack() as stack:
        for method in PARSE_METHODS:
            stack.enter_context(mock.patch.object(argparse.ArgumentParser, method, taker(method)))
        with contextlib.suppress(_Parsed):
            module.main(["--help"])
    assert taken, f"{tools.COMMANDS[name].module}.main did not build an argparse parser"
    return taken[0]


def sub_parsers(parser: argparse.ArgumentParser) -> list[argparse.ArgumentParser]:
    """``parser`` and the parsers of its sub-commands, at any depth."""
    out = [parser]
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                out += sub_parsers(sub)
    return out


def option_strings(parser: argparse.ArgumentParser) -> set[str]:
    """Every option of ``parser`` and of its sub-commands."""
    return {option for each in sub_parsers(parser) for option in each._option_string_actions}
