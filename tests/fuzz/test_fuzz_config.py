"""Fuzzing the settings a user types (validation/settings.py, the evaluator's arguments): each value at, just inside
and beyond its bound, in every type the command line can give (``key=nan``, ``key=true``, ``key='5'``, ...), parsed
by Hydra's own override parser. A setting either passes, and then lies inside its documented bounds, or stops the
run with one line that names the key."""
from __future__ import annotations

import codecs
import functools
import math

from hypothesis import example, given
from hypothesis import strategies as st
from omegaconf import OmegaConf

from tests.helpers.fuzz_strategies import budget, user_error_or
from tests.helpers.speed import KMEANS

TOKENS = ["0", "1", "2", "3", "-1", "-2", "-5", "32", "127", "128", "129", "512", "513", "100000", "0.0", "0.5",
          "1e-5", "-1e-5", "1e-300", "2.5", "nan", "inf", "-inf", "true", "false", "null", "abc", "'5'", "''",
          "auto", "utf-8", "latin-1", "utf-9", "highest", "high", "medium", "low"]


def number(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def integer(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def known_codec(v) -> bool:
    try:
        codecs.lookup(v)
        return True
    except (LookupError, TypeError):
        return False


# key -> whether a value is allowed (the bounds docs/configuration.md and docs/reliability.md state)
RULES = {
    "batch_size": lambda v, limit: integer(v) and v >= 2,
    "method.lr": lambda v, limit: number(v) and 0 < v < math.inf,
    "method.head_lr_multiplier": lambda v, limit: number(v) and 0 < v < math.inf,
    "method.temperature": lambda v, limit: number(v) and 0 < v < math.inf,
    "method.alpha": lambda v, limit: number(v) and 0 < v < math.inf,
    "max_length": lambda v, limit: integer(v) and 1 <= v <= limit,
    "method.max_length": lambda v, limit: integer(v) and 1 <= v <= limit,
    "dataset.max_length": lambda v, limit: integer(v) and 1 <= v <= limit,
    "dataset.num_clusters": lambda v, limit: v is None or v == "auto" or (integer(v) and v >= 2),
    "dataset.encoding": lambda v, limit: v is None or (isinstance(v, str) and v.strip() != "" and known_codec(v)),
    "float32_matmul_precision": lambda v, limit: v is None or v in ("highest", "high", "medium"),
}
BACKBONE_LIMITS = {"minilm": 512, "tiny": 128}


@functools.lru_cache(maxsize=1)
def composed():
    from tests.helpers import compose_config

    return compose_config([])


def base_config():
    """A fresh copy of the default run's configuration (composing costs a few tenths of a second)."""
    return OmegaConf.create(OmegaConf.to_container(composed(), resolve=False))


def parse(token: str):
    """The value Hydra gives ``key=<token>`` on the command line."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    return OverridesParser.create().parse_override(f"x={token}").value()


@budget(fast=30, long=3000)
@given(st.sampled_from(sorted(RULES)), st.sampled_from(TOKENS), st.sampled_from(sorted(BACKBONE_LIMITS)))
@example("method.temperature", "inf", "minilm")  # a temperature of inf makes every similarity 0
@example("max_length", "129", "tiny")  # beyond the backbone's positions: stopped inside the first step
@example("max_length", "513", "minilm")
@example("dataset.encoding", "1", "minilm")  # a number: codecs.lookup raised a TypeError
@example("dataset.encoding", "0", "minilm")  # 0: silently read as UTF-8
@example("dataset.encoding", "''", "minilm")  # an empty name: silently read as UTF-8 (found by make fuzz)
@example("method.head_lr_multiplier", "null", "minilm")  # None reached the optimiser: a TypeError in training
@example("method.max_length", "null", "tiny")  # None turned truncation off
def test_a_setting_passes_inside_its_bounds_or_names_its_key(key, token, backbone):
    import validation

    cfg = base_config()
    OmegaConf.update(cfg, "backbone.name", backbone, force_add=True)
    value = parse(token)
    OmegaConf.update(cfg, key, value, force_add=True)
    with user_error_or(key) as outcome:
        validation.validate(cfg)
    allowed = RULES[key](value, BACKBONE_LIMITS[backbone])
    assert (outcome["error"] is None) == allowed, (key, value, outcome["error"])


@budget(fast=40, long=2000)
@given(st.sampled_from(TOKENS), st.sampled_from(TOKENS))
@example("-5", "-1")  # Lightning refuses max_steps < -1 with a traceback
@example("-1", "-1")
def test_the_step_and_epoch_budget(steps_token, epochs_token):
    import validation

    steps, epochs = parse(steps_token), parse(epochs_token)
    cfg = base_config()
    OmegaConf.update(cfg, "trainer.max_steps", steps)
    OmegaConf.update(cfg, "trainer.max_epochs", epochs)
    with user_error_or("trainer.max_steps", "trainer.max_epochs") as outcome:
        validation.check_budget(cfg)

    def bound(v, optional):
        return (optional and v is None) or (integer(v) and v >= -1 and v != 0)

    allowed = bound(steps, True) and bound(epochs, True) and not (steps in (-1, None) and epochs == -1)
    assert (outcome["error"] is None) == allowed, (steps, epochs, outcome["error"])


@budget(fast=40, long=2000)
@given(st.sampled_from(TOKENS), st.sampled_from(TOKENS), st.sampled_from(TOKENS))
def test_the_clustering_evaluator_and_stopping_arguments(below_token, patience_token, every_token):
    from callbacks.evaluation.clustering_eval import ClusteringEvaluator
    from callbacks.evaluation.clustering_stop import ClusteringEarlyStopping

    below, patience, every = parse(below_token), parse(patience_token), parse(every_token)
    with user_error_or("when_changed_below", "patience", "every_n_steps") as outcome:
        ClusteringEvaluator(every_n_steps=every, kmeans_backend=KMEANS, kmeans_sample=0, sample=0)
        ClusteringEarlyStopping(when_changed_below=below, patience=patience)
    allowed = ((below is None or (number(below) and 0 < below < 1)) and integer(patience) and patience >= 1
               and integer(every) and every >= 0)
    assert (outcome["error"] is None) == allowed, (below, patience, every, outcome["error"])


def test_the_tiny_backbone_limit_is_the_one_it_is_built_with():
    from textcore.encoding.backbone import build_tiny_bert
    from validation import TINY_POSITIONS

    assert build_tiny_bert().config.max_position_embeddings == TINY_POSITIONS
