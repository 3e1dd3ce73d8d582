"""textcore.console.run_cli, the tail of every tool (`python tools.py <command>` and its `python -m` module): a user
error is one line on stderr and exit 2."""
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("command, named", [
    (["-m", "ctclust.commands.export", "--run", "no/such/run", "--output", "out"], "no/such/run"),
    (["-m", "ctclust.commands.predict", "--run", "no/such/run", "--input", "x.csv", "--output", "y.csv"],
     "x.csv"),
    ([str(ROOT / "tools.py"), "export", "--run", "no/such/run", "--output", "out"], "no/such/run"),
    ([str(ROOT / "tools.py"), "predict", "--run", "no/such/run", "--input", "x.csv", "--output", "y.csv"], "x.csv"),
])
def test_a_user_error_is_one_line_and_exit_2(command, named, tmp_path):
    done = subprocess.run([sys.executable, *command], cwd=tmp_path, capture_output=True, text=True, timeout=300,
                          env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and named in lines[0]


def test_the_user_error_catch_is_written_once():
    """Finding the user error an exception wraps and reporting it is ``textcore.errors.report_user_error_or_raise``
    (the tools through ``exit_on_user_error``, run.py directly): no other module pairs find_user_error with
    report_user_error."""
    import ast

    from tests.project.test_architecture import project_modules

    def names_called(path: Path) -> set[str]:
        calls = [n.func for n in ast.walk(ast.parse(path.read_text())) if isinstance(n, ast.Call)]
        return {getattr(f, "id", getattr(f, "attr", None)) for f in calls}

    catching = [m for m, path in project_modules(ROOT).items() if m != "textcore.errors"
                and {"find_user_error", "report_user_error"} <= names_called(path)]
    assert catching == []
    assert "report_user_error_or_raise" in names_called(ROOT / "run.py")
