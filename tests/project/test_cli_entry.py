"""console.run_cli, the tail of every `python -m` command: a user error is one line on stderr and exit 2."""
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("command, named", [
    (["evaluation.model_io.export", "--run", "no/such/run", "--out", "out"], "no/such/run"),
    (["evaluation.model_io.predict", "--run", "no/such/run", "--input", "x.csv", "--output", "y.csv"], "x.csv"),
])
def test_a_user_error_is_one_line_and_exit_2(command, named, tmp_path):
    done = subprocess.run([sys.executable, "-m", *command], cwd=tmp_path, capture_output=True, text=True, timeout=300,
                          env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and named in lines[0]


def test_the_old_flat_names_still_run_and_say_where_the_module_is_now(tmp_path):
    """`python -m evaluation.predict` (the layout before the sub-packages) runs today's module."""
    done = subprocess.run([sys.executable, "-m", "evaluation.predict", "--run", "no/such/run", "--input", "x.csv",
                           "--output", "y.csv"], cwd=tmp_path, capture_output=True, text=True, timeout=300,
                          env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})
    assert done.returncode == 2, done.stderr
    note, error = done.stderr.strip().splitlines()
    assert "evaluation.predict is now evaluation.model_io.predict" in note and "x.csv" in error


def test_every_moved_name_points_at_a_module_and_no_file_is_left_at_the_old_place():
    import importlib

    import evaluation
    from evaluation.clustering import metrics
    for old, new in evaluation.MOVED.items():
        assert importlib.util.find_spec(new) is not None, new
        assert not (ROOT / (old.replace(".", "/") + ".py")).exists() and not (ROOT / old.replace(".", "/")).exists()
    assert importlib.import_module("evaluation.metrics").cluster_accuracy.__code__.co_filename == metrics.__file__
