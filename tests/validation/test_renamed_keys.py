"""A key a user's command line may still carry under its old name stops the run with the new name and the fix."""
import pytest

from tests.helpers import compose_config
from textcore.errors import ConfigError
from validation.settings import validate


def test_the_old_choose_k_seeds_names_kmeans_runs():
    with pytest.raises(ConfigError, match=r"choose_k.seeds=3 is now choose_k.kmeans_runs .*set choose_k.kmeans_runs=3"):
        validate(compose_config(["choose_k.seeds=3"]))
    validate(compose_config(["choose_k.kmeans_runs=3"]))  # the new name passes
