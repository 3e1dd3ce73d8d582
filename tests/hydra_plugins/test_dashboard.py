"""optuna-dashboard (its current release, a test dependency) opens a study of each storage the sweeper writes, by the
command the sweeper's log and docs/sweeps.md print: the trials, their states and the user attributes the sweeper
records (run folder, error) are what the dashboard's API returns."""
from __future__ import annotations

import io
import json
from wsgiref.util import setup_testing_defaults

import pytest

optuna = pytest.importorskip("optuna", reason="the `sweep` extra (Optuna)")
optuna_dashboard = pytest.importorskip("optuna_dashboard", reason="optuna-dashboard (requirements.txt)")

from hydra_plugins.resumable_optuna.killed_trials import RequeueStale  # noqa: E402
from hydra_plugins.resumable_optuna.study_storage import dashboard_command, open_storage  # noqa: E402


def write_study(storage: str) -> list[float]:
    """A study as a sweep leaves it: two COMPLETE trials and a FAIL one with its error, through the sweeper's storage
    (heartbeats on)."""
    study = optuna.create_study(study_name="sccl", direction="maximize",
                                storage=open_storage(storage, 30.0, 300.0, RequeueStale(300.0)))
    values = []
    for number, value in enumerate([0.25, 0.75, None]):
        trial = study.ask()
        trial.suggest_float("method.lr", 1e-6, 1e-4, log=True)
        trial.set_user_attr("run", f"sweep/{number}")
        if value is None:
            trial.set_user_attr("error", "RuntimeError: injected")
            study.tell(trial, state=optuna.trial.TrialState.FAIL)
        else:
            study.tell(trial, value)
            values.append(value)
    return values


def get(app, path: str) -> dict:
    environ: dict = {"PATH_INFO": path, "REQUEST_METHOD": "GET", "wsgi.input": io.BytesIO()}
    setup_testing_defaults(environ)
    status = []
    body = b"".join(app(environ, lambda code, headers, exc_info=None: status.append(code)))
    assert status[0].startswith("200"), (status, body[:300])
    return json.loads(body)


def assert_dashboard_reads(storage: str, values: list[float]) -> None:
    command = dashboard_command(storage)
    assert command.startswith("optuna-dashboard ")
    app = optuna_dashboard.wsgi(command.split(" ", 1)[1])  # what the user types after optuna-dashboard
    studies = get(app, "/api/studies")["study_summaries"]
    [study] = [s for s in studies if s["study_name"] == "sccl"]
    detail = get(app, f"/api/studies/{study['study_id']}")
    trials = detail["trials"]
    assert [t["state"] for t in trials] == ["Complete", "Complete", "Fail"]
    assert [t["values"][0] for t in trials[:2]] == values
    attrs = {a["key"]: a["value"] for a in trials[2]["user_attrs"]}
    assert attrs["error"] == "RuntimeError: injected" and attrs["run"] == "sweep/2"
    assert detail["best_trials"][0]["number"] == 1


@pytest.mark.parametrize("kind", ["sqlite", "journal"])
def test_optuna_dashboard_opens_a_study_of_each_file_storage(tmp_path, kind):
    storage = f"sqlite:///{tmp_path / 'optuna.db'}" if kind == "sqlite" else f"journal:{tmp_path / 'sccl.journal'}"
    assert_dashboard_reads(storage, write_study(storage))


@pytest.mark.slow
def test_optuna_dashboard_opens_a_study_on_a_postgresql_server():
    pytest.importorskip("psycopg", reason="the `sweep` extra (psycopg)")
    from tests.helpers.postgres import postgres_url_or_skip

    with postgres_url_or_skip() as url:
        assert_dashboard_reads(url, write_study(url))
