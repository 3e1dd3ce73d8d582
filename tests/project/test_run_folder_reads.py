"""One reader for run folders: outside ``textcore/run_folder.py`` (and tests and scripts) no code spells a run folder's
file names or unpickles a checkpoint itself, and nothing outside tests and the studies of the authors' own files
(``scripts/studies``) loads one without ``weights_only`` but the opt-in's one place (docs/reliability.md)."""
from __future__ import annotations

import ast
from pathlib import Path

from tests.project.test_architecture import ROOT, project_modules
from textcore import run_folder

READER = ROOT / "textcore" / "run_folder.py"
FILE_NAMES = (run_folder.RESULTS, run_folder.CONFIG, Path(run_folder.LAST_CHECKPOINT).name)
LOADERS = {"load_from_checkpoint", "pl_load", "_load_from_checkpoint", "get_unsafe_globals_in_checkpoint"}


def _docstrings(tree: ast.AST) -> set[int]:
    return {id(node.body[0].value) for node in ast.walk(tree)
            if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body
            and isinstance(node.body[0], ast.Expr) and isinstance(node.body[0].value, ast.Constant)}


def file_name_literals(source: str) -> list[str]:
    """String constants of code (not docstrings) that hold a run folder's file name, as 'line: text'."""
    tree = ast.parse(source)
    docs = _docstrings(tree)
    return [f"{node.lineno}: {node.value[:80]!r}" for node in ast.walk(tree)
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docs
            and any(name in node.value for name in FILE_NAMES)]


def _called_name(call: ast.Call) -> str:
    func = call.func
    parts = []
    while isinstance(func, ast.Attribute):
        parts.append(func.attr)
        func = func.value
    if isinstance(func, ast.Name):
        parts.append(func.id)
    return ".".join(reversed(parts))


def checkpoint_loads(source: str) -> list[tuple[int, str, bool]]:
    """(line, call, passes weights_only=False) of each torch.load or Lightning checkpoint load in ``source``."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Call):
            continue
        name = _called_name(node)
        if name in ("torch.load", "torch.serialization.load") or name.split(".")[-1] in LOADERS:
            unsafe = any(k.arg == "weights_only" and not (isinstance(k.value, ast.Constant) and k.value.value is True)
                         for k in node.keywords)
            found.append((node.lineno, name, unsafe))
    return found


def _code_files(skip_scripts: bool) -> dict[str, Path]:
    return {m: p for m, p in project_modules().items() if not (skip_scripts and m.split(".")[0] == "scripts")}


def test_the_checkers_see_a_literal_a_load_and_an_unsafe_one():
    source = ('"""Reads results.json."""\nimport torch\n\n\ndef f(p):\n    """last.ckpt"""\n'
              '    a = torch.load(p, weights_only=False)\n    b = M.load_from_checkpoint(p)\n'
              '    c = torch.load(p, weights_only=True)\n'
              '    return p / "checkpoints" / "last.ckpt", f"{p}/results.json"\n')
    assert [line.split(":")[0] for line in file_name_literals(source)] == ["10", "10"]
    assert sorted(checkpoint_loads(source)) == [(7, "torch.load", True), (8, "M.load_from_checkpoint", False),
                                                (9, "torch.load", False)]


def test_no_code_but_the_reader_spells_a_run_folders_file_names():
    found = [f"{path.relative_to(ROOT)}:{hit}" for path in _code_files(skip_scripts=True).values() if path != READER
             for hit in file_name_literals(path.read_text())]
    assert not found, f"use textcore.run_folder (RunFolder, its names) instead of spelling them: {found}"


def test_no_code_but_the_reader_opens_a_checkpoint():
    found = [f"{path.relative_to(ROOT)}:{line} {name}" for path in _code_files(skip_scripts=True).values()
             if path != READER for line, name, _ in checkpoint_loads(path.read_text())]
    assert not found, f"read checkpoints with textcore.run_folder.load_checkpoint: {found}"


def test_only_the_opt_in_loads_without_weights_only():
    unsafe = [f"{path.relative_to(ROOT)}:{line}" for module, path in _code_files(skip_scripts=False).items()
              if not module.startswith("scripts.studies")
              for line, _, is_unsafe in checkpoint_loads(path.read_text()) if is_unsafe]
    in_reader = [hit for hit in unsafe if hit.startswith(str(READER.relative_to(ROOT)))]
    assert len(in_reader) == 1 and unsafe == in_reader, unsafe
    source = READER.read_text()
    line = int(in_reader[0].split(":")[1])
    assert "if trust:" in source.splitlines()[line - 2], "the one unsafe load is behind the opt-in"
