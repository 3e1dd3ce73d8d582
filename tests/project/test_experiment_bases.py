"""Experiments built on a per-method base, and methods sharing one encoder block, compose exactly the values
they composed when each file spelled everything out (tests/fixtures/composed_configs.json, written from the
files before the bases existed)."""
import json

import pytest

from tests.helpers.config_snapshot import FIXTURE, composed, rows

SNAPSHOT = json.loads(FIXTURE.read_text())


def differences(expected, actual, where: str = "") -> list[str]:
    """Dotted keys whose values differ, so a failure names what moved instead of printing two large dicts."""
    if isinstance(expected, dict) and isinstance(actual, dict):
        found = []
        for key in sorted(set(expected) | set(actual)):
            found += differences(expected.get(key, "<absent>"), actual.get(key, "<absent>"), f"{where}.{key}")
        return found
    return [] if expected == actual else [f"{where.lstrip('.')}: {expected!r} -> {actual!r}"]


def test_every_experiment_and_method_is_in_the_snapshot():
    assert sorted(SNAPSHOT) == sorted(rows()), "regenerate: python -m tests.helpers.config_snapshot"


@pytest.mark.parametrize("override", sorted(SNAPSHOT))
def test_composes_the_snapshot(override):
    assert differences(SNAPSHOT[override], composed(override)) == []


def test_differences_names_the_key():
    found = differences({"a": {"b": 1, "c": 2}}, {"a": {"b": 1, "d": 2}})
    assert found == ["a.c: 2 -> '<absent>'", "a.d: '<absent>' -> 2"]
