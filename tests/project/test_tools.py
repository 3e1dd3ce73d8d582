"""tools.py, the one command of the tools: every command answers --help without importing torch, Lightning or
transformers (they take seconds to import), dispatches to its module's main, and says what it is not."""
from __future__ import annotations

import ast
import importlib
import inspect
import re
import subprocess
import sys
from pathlib import Path

import pytest

from ctclust import tools

ROOT = Path(__file__).resolve().parents[2]
MODEL_LIBRARIES = ("torch", "lightning", "transformers")


def run_tools(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-X", "importtime", str(ROOT / "tools.py"), *args], cwd=cwd,
                          capture_output=True, text=True, timeout=120)


def imported(stderr: str) -> set[str]:
    """Top-level packages that ``-X importtime`` saw imported."""
    return {m.group(1).strip().split(".")[0] for m in re.finditer(r"^import time:.*\|(.*)$", stderr, re.M)}


def test_the_model_libraries_show_up_in_the_import_record():
    """The check below can fail: a command that loads a model imports them (seen the same way)."""
    done = subprocess.run([sys.executable, "-X", "importtime", "-c", "import torch"], capture_output=True, text=True,
                          timeout=120)
    assert "torch" in imported(done.stderr)


@pytest.mark.parametrize("name", list(tools.COMMANDS))
def test_a_command_answers_help_without_the_model_libraries(name):
    done = run_tools(name, "--help")
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.startswith(f"usage: python tools.py {name}"), done.stdout[:200]
    assert imported(done.stderr) & set(MODEL_LIBRARIES) == set()


def test_the_list_and_the_offline_download_need_no_model_library(tmp_path):
    listing = run_tools()
    assert listing.returncode == 0 and all(f"  {name} " in listing.stdout for name in tools.COMMANDS)
    assert imported(listing.stderr) & set(MODEL_LIBRARIES) == set()
    catalogue = run_tools("download", "--list", "--dest", str(tmp_path / "data"), cwd=tmp_path)
    assert catalogue.returncode == 0 and "missing" in catalogue.stdout, catalogue.stderr[-2000:]
    assert imported(catalogue.stderr) & set(MODEL_LIBRARIES) == set()


def test_an_unknown_command_names_the_closest_one():
    done = run_tools("evalute", "--model", "minilm")
    assert done.returncode == 2 and done.stdout == ""
    [line] = [line for line in done.stderr.splitlines() if not line.startswith("import time:")]
    assert "no command 'evalute'" in line and "did you mean 'evaluate'" in line


@pytest.mark.parametrize("name", list(tools.COMMANDS))
def test_a_command_runs_the_main_of_its_module_as_python_m_does(name):
    """Same entry (main(argv)) and the same console: INFO lines where the module's own __main__ shows them."""
    command = tools.COMMANDS[name]
    module = importlib.import_module(command.module)
    assert list(inspect.signature(module.main).parameters)[:1] == ["argv"]
    tail = [node for node in ast.walk(ast.parse(inspect.getsource(module))) if isinstance(node, ast.Call)
            and getattr(node.func, "attr", None) == "run_cli"]
    shows_info = any(k.arg == "info_logs" and getattr(k.value, "value", False) for call in tail for k in call.keywords)
    assert command.info_logs == shows_info


def test_a_user_error_of_a_command_is_the_tools_exit_status_2(tmp_path):
    """Here augment's input file is missing: one line, status 2, as from its own module."""
    done = run_tools("augment", str(tmp_path / "missing.csv"), "--output", str(tmp_path / "out.csv"),
                     "--method", "eda")
    errors = [line for line in done.stderr.splitlines() if line.startswith("error: ")]
    assert done.returncode == 2 and len(errors) == 1 and "missing.csv" in errors[0], done.stderr[-2000:]


def test_the_tools_console_leaves_transformers_bars_off_and_the_hubs_downloads_on():
    """textcore.console.configure_tool imports neither library, yet transformers imported after it draws no bars."""
    code = ("import sys; from textcore import console; console.configure_tool(); "
            "print(any(m in sys.modules for m in ('lightning', 'transformers'))); "
            "import transformers.utils.logging as tl; from huggingface_hub.utils import are_progress_bars_disabled; "
            "print(tl.is_progress_bar_enabled(), are_progress_bars_disabled('huggingface_hub.http_get'))")
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.stdout.split() == ["False", "False", "False"], done.stderr[-2000:]
