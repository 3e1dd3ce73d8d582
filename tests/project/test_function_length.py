"""No function of the project's code (tests and scripts aside) is longer than 80 lines, its docstring included: a
longer one is read in pieces anyway, so it is written in named pieces."""
import ast
from pathlib import Path

from tests.project.test_architecture import project_modules

ROOT = Path(__file__).resolve().parents[2]
LIMIT = 80


def long_functions(files) -> list[str]:
    """``path:line name (N lines)`` of each function or method of ``files`` longer than :data:`LIMIT` lines."""
    found = []
    for path in files:
        for node in ast.walk(ast.parse(Path(path).read_text(encoding="utf-8"))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                lines = node.end_lineno - node.lineno + 1
                if lines > LIMIT:
                    where = Path(path).relative_to(ROOT) if Path(path).is_relative_to(ROOT) else Path(path).name
                    found.append(f"{where}:{node.lineno} {node.name} ({lines} lines)")
    return found


def test_no_function_is_longer_than_80_lines():
    files = [p for name, p in project_modules().items() if not name.startswith("scripts")]
    assert files, "no project module found"
    assert long_functions(files) == [], f"functions over {LIMIT} lines: split them into named steps"


def test_the_check_sees_a_long_function_in_a_method_and_a_short_one_passes(tmp_path):
    long_body = "\n".join(f"    x{i} = {i}" for i in range(LIMIT))
    source = tmp_path / "sample.py"
    source.write_text("class A:\n    def short(self):\n        return 1\n\n    def long(self):\n"
                      + long_body.replace("    x", "        x") + "\n")
    assert [entry.split(" ")[1] for entry in long_functions([source])] == ["long"]
