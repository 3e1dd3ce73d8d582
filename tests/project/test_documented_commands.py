"""Every command README.md and docs/ show still runs as written: a renamed command, a removed option or a config
key that is gone fails here.

- ``python tools.py <command> ...``: the command exists and its parser accepts the line (in a code block: the
  whole line; in running text, where a command is often quoted in part, the options it names);
- ``python run.py <overrides>``: Hydra composes the configuration with them (a multirun's sweeps take their first
  value), without training;
- ``python -m <module>``: the module exists.

Placeholders (``<run>``, ``/path/to/folder``) stand for any value; ``[--option value]`` is usage notation for an
optional part; ``...`` marks a line quoted in part. docs/history/ is not read: it records commands as they were
run on their date."""
from __future__ import annotations

import argparse
import contextlib
import importlib
import importlib.util
import io
import re
import shlex
from pathlib import Path

import pytest

from ctclust import tools
from tests.helpers import CONF
from tests.helpers.tool_parsers import option_strings, tool_parser

ROOT = Path(__file__).resolve().parents[2]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")), *sorted((ROOT / "docs" / "methods").glob("*.md"))]
COMMAND = re.compile(r"(?:^|[\s`($])(?:[\w./-]*/)?python3? +(tools\.py|run\.py|-m +[\w.]+)(?=\s|$|`)(.*)")
SHELL_ENDS = {"|", "||", "&&", ";", "&", ">", ">>", "2>", "2>&1"}
PLACEHOLDER = "PLACEHOLDER"


def quoted_lines(text: str) -> list[tuple[int, str, bool]]:
    """(line number, text, in a code block) of every code-block line (continuations joined) and inline code span."""
    out, fence, joined, start = [], False, "", 0
    for n, line in enumerate(text.splitlines(), 1):
        if line.lstrip().startswith("```"):
            fence = not fence
            continue
        if fence:
            start = start if joined else n
            if line.rstrip().endswith("\\"):
                joined += line.rstrip()[:-1] + " "
                continue
            out.append((start, joined + line, True))
            joined = ""
        else:
            out += [(n, span, False) for span in re.findall(r"`([^`]+)`", line)]
    return out


def words(rest: str) -> list[str]:
    """The command's own words: shell comments, pipes, redirections and chained commands cut off."""
    rest = re.sub(r"<[^<>]*>", PLACEHOLDER, rest.split("`")[0])  # a command quoted in a code block ends at a backtick
    rest = rest.rstrip(" .,;:")
    while rest.endswith(")") and rest.count(")") > rest.count("("):  # a command quoted inside parentheses
        rest = rest[:-1].rstrip(" .,;:")
    lexer = shlex.shlex(rest, posix=True, punctuation_chars="|&;>")
    lexer.whitespace_split, lexer.commenters = True, "#"
    out = []
    for word in lexer:
        if word in SHELL_ENDS or word.startswith(("|", "&", ";", ">")):
            break
        out.append(word)
    return out


def documented_commands() -> list:
    found = []
    for path in DOCS:
        for n, line, fenced in quoted_lines(path.read_text()):
            for match in COMMAND.finditer(line):
                where = f"{path.relative_to(ROOT)}:{n}"
                found.append(pytest.param(match.group(1), words(match.group(2)), fenced, path,
                                          id=f"{where} {match.group(1)}"))
    return found


COMMANDS = documented_commands()


def parse(parser: argparse.ArgumentParser, method: str, args: list[str]) -> str:
    """'' when ``parser`` accepts ``args`` as the tool parses them, else argparse's message."""
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        try:
            getattr(parser, method)(args)
        except SystemExit as stop:
            return err.getvalue().strip() or f"exit {stop.code}"
    return ""


def check_tool(args: list[str], whole_line: bool) -> None:
    if not args or args[0] == PLACEHOLDER:  # `python tools.py <command> --help`: the tool itself
        return
    name, rest = args[0], args[1:]
    assert name in tools.COMMANDS, f"tools.py has no command '{name}' (its commands: {', '.join(tools.COMMANDS)})"
    parser, method = tool_parser(name)
    rest = [word.strip("[]") for word in rest if word.strip("[]") not in ("", "...")]
    if whole_line and "..." not in args:
        message = parse(parser, method, rest)
        assert message == "", f"python tools.py {shlex.join(args)}: {message}"
    else:
        known = option_strings(parser)
        unknown = [w for w in rest if w.startswith("-") and w.split("=")[0] not in known and not w[1:2].isdigit()]
        assert unknown == [], f"python tools.py {name}: no option {unknown}"


def compositions(overrides: list[str]) -> tuple[list[list[str]], list[str]]:
    """The override lists a multirun makes, enough to try every value of each sweep once (the others at their
    first value), and the keys its ``hydra.sweeper.params`` or command-line intervals search (the sweeper reads those,
    not Hydra's compose)."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    base, sweeps, searched = [], [], []
    for override in OverridesParser.create().parse_overrides(overrides):
        key = override.get_key_element()
        if key.startswith("hydra.sweeper.params."):
            searched.append(key[len("hydra.sweeper.params."):])
        elif override.is_interval_sweep():  # a search space on the command line, for the Optuna sweeper
            searched.append(key)
        elif override.is_sweep_override():
            first, *others = override.sweep_string_iterator()
            sweeps.append((len(base), key, others))
            base.append(f"{key}={first}")
        else:
            base.append(override.input_line)
    return [base] + [base[:i] + [f"{key}={value}"] + base[i + 1:] for i, key, others in sweeps for value in others], \
        searched


def check_run(args: list[str], page: Path | None = None) -> None:
    overrides = [a for a in args if a not in ("-m", "--multirun")]
    if not overrides or "..." in overrides:  # run.py named, not a command line
        return
    for key, plugin in (("hparams_search=", "optuna"),
                        ("hydra/launcher=joblib", "hydra_plugins.hydra_joblib_launcher"),
                        ("hydra/launcher=s", "hydra_plugins.hydra_submitit_launcher")):
        if any(o.startswith(key) for o in overrides) and importlib.util.find_spec(plugin) is None:
            pytest.skip(f"{plugin} is not installed (an extra of pyproject.toml)")
    from hydra import compose, initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra
    from hydra.errors import MissingConfigException
    from omegaconf import OmegaConf

    variants, searched = compositions(overrides)
    GlobalHydra.instance().clear()
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        for variant in variants:
            try:
                cfg = compose(config_name="config", overrides=variant, return_hydra_config=True)
            except MissingConfigException as err:
                wanted = re.search(r"Could not find '([\w/]+)'", str(err))
                if page is not None and wanted and f"conf/{wanted.group(1)}.yaml" in page.read_text():
                    pytest.skip(f"{page.name} has the reader write conf/{wanted.group(1)}.yaml first")
                raise
            missing = [key for key in searched if OmegaConf.select(cfg, key, default=PLACEHOLDER) == PLACEHOLDER]
            assert missing == [], f"hydra.sweeper.params searches {missing}, which the configuration has not"


def test_the_documents_show_commands():
    """The extraction itself: the command lines of README.md are found, with their options."""
    readme = {(c.values[0], " ".join(c.values[1])) for c in COMMANDS if c.id.startswith("README.md")}
    assert ("tools.py", "predict --run logs/my_texts --input new_texts.csv --output assigned.csv") in readme
    assert ("run.py", "--multirun dataset=searchsnippets method.temperature=0.2,0.5 seed=0,1") in readme
    assert len(COMMANDS) > 100 and {c.values[0] for c in COMMANDS} >= {"tools.py", "run.py"}


@pytest.mark.parametrize("program,args,whole_line,page", COMMANDS)
def test_a_documented_command_runs_as_written(program, args, whole_line, page):
    if program == "tools.py":
        check_tool(args, whole_line)
    elif program == "run.py":
        check_run(args, page)
    else:
        module = program.split()[-1]
        assert importlib.util.find_spec(module) is not None, f"python -m {module}: no such module"


@pytest.mark.parametrize("line,complaint", [
    ("python tools.py evaluat --model minilm", "no command 'evaluat'"),
    ("python tools.py predict --run r --input i.csv --output o.csv --no-such-option", "--no-such-option"),
    ("the run (`python tools.py describe --run <run> --no-such-option`)", "no option"),
])
def test_a_renamed_command_or_a_removed_option_fails(line, complaint):
    [(n, text, fenced)] = quoted_lines(line) if "`" in line else [(1, line, True)]
    [match] = COMMAND.finditer(text)
    with pytest.raises(AssertionError, match=complaint):
        check_tool(words(match.group(2)), fenced)


def test_a_removed_config_key_fails():
    from hydra.errors import ConfigCompositionException

    with pytest.raises(ConfigCompositionException):
        check_run(["method=sccl", "dataset.no_such_key=1"])
    with pytest.raises(ConfigCompositionException):
        check_run(["-m", "method=sccl,no_such_method"])  # not only a sweep's first value
    with pytest.raises(AssertionError, match="method.no_such_key"):
        check_run(["hparams_search=sccl_optuna", "hydra.sweeper.params.method.no_such_key=tag(log, interval(1, 2))"])
    with pytest.raises(AssertionError, match="method.no_such_key"):
        check_run(["-m", "hparams_search=sccl_optuna", "method.no_such_key=tag(log, interval(1, 2))"])
