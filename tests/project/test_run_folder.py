"""textcore.run_folder.find_runs: the one way runs are found (aggregate, fidelity and label-free reports)."""
import pytest

from textcore import run_folder
from textcore.errors import MissingFileError


def make_run(folder, name=run_folder.RESULTS):
    folder.mkdir(parents=True)
    (folder / name).write_text("{}")
    return folder.resolve()


def test_a_multirun_gives_its_jobs_in_natural_order_and_nothing_inside_a_run(tmp_path):
    sweep = tmp_path / "sweep"
    jobs = [make_run(sweep / str(i)) for i in (10, 2, 1)]
    (sweep / run_folder.MULTIRUN).write_text("")
    make_run(sweep / "notes" / run_folder.CHECKPOINTS / "x")  # nothing below a checkpoints folder is a run
    failed = make_run(sweep / "3", run_folder.FAILED)
    assert run_folder.find_runs([sweep]) == [jobs[2], jobs[1], failed, jobs[0]]


def test_a_run_is_itself_once_and_a_missing_path_is_one_line(tmp_path):
    run = make_run(tmp_path / "run", run_folder.CONFIG)
    assert run_folder.find_runs([run, tmp_path / "run"]) == [run]
    with pytest.raises(MissingFileError, match="no such run or multirun folder"):
        run_folder.find_runs([tmp_path / "nope"])
