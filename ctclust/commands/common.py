"""The tools' one language on the command line (docs/architecture.md, "The tools"): ``--run`` names one run
folder, ``--runs`` folders of runs, ``--model`` any model reference (a run folder, a checkpoint, an exported
folder, a Hub name, ``minilm``), ``--output`` what a tool writes, ``--seeds`` a list of training seeds, ``--seed``
one seed; every ``--help`` shows the defaults (``tests/project/test_tool_options.py`` holds every tool to it).
"""
from __future__ import annotations

import argparse

from textcore.console import TOOLS
from textcore.run_folder import TRUST_OPTION


class ShowDefaults(argparse.ArgumentDefaultsHelpFormatter):
    """argparse's formatter that appends ``(default: X)`` to an option's help, except where the help already
    says its default or there is none to say (``None``, ``False``, an empty value)."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        help_text = action.help or ""
        default = action.default
        nothing = default is None or default is False or (isinstance(default, (str, list, tuple)) and not default)
        if nothing or "default" in help_text.lower():
            return action.help
        return super()._get_help_string(action)


def seed_list(text: str) -> list[int]:
    """``--seeds 0,1,2``: the seeds as integers (an argparse ``type``)."""
    try:
        seeds = [int(s) for s in text.split(",") if s.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"'{text}': give integers separated by commas, e.g. 0,1,2") from None
    if not seeds:
        raise argparse.ArgumentTypeError(f"'{text}': give at least one seed, e.g. 0,1,2")
    return seeds


def tool_parser(command: str, description: str, **kwargs) -> argparse.ArgumentParser:
    """The head of every tool: the parser of ``python tools.py <command>``, whose help opens with the first line of
    ``description`` (a module's docstring may be given whole) and shows every option's default
    (:class:`ShowDefaults`); ``kwargs`` go to ``argparse.ArgumentParser``."""
    kwargs.setdefault("formatter_class", ShowDefaults)
    return argparse.ArgumentParser(prog=f"{TOOLS} {command}", description=description.split("\n")[0], **kwargs)


def add_trust_option(parser: argparse.ArgumentParser) -> None:
    """The commands' opt-in for a checkpoint that needs more than ``weights_only``."""
    parser.add_argument(TRUST_OPTION, action="store_true", dest="trust_checkpoint",
                        help="load a checkpoint holding pickled objects, which can run code: only for a file you "
                             "trust (default: tensors and plain values only)")


def add_backend_argument(parser) -> None:
    """``--backend`` of the commands that embed a corpus (predict, evaluate)."""
    from textcore.encoding.backends import BACKENDS

    parser.add_argument("--backend", default="torch", choices=BACKENDS,
                        help="what embeds the texts: torch, or ONNX Runtime on the CPU (onnx: float32, the same "
                             "embeddings; onnx-int8: quantised, faster, close); the export is cached beside the "
                             "model and reused")
