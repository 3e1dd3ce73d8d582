"""What the fuzz tests (tests/test_fuzz_*.py) generate, their two profiles, and the property they share.

Profiles (``HYPOTHESIS_PROFILE``): ``fast`` (the default tier: a few dozen inputs per property, the whole set
well under a minute on 2 cores) and ``long`` (``make fuzz``: each property's own count, thousands in all).
Neither keeps a database of examples: a failure prints the input that caused it, which becomes an ``@example``.

The shared property, :func:`user_error_or`: a call ends with a correct result or with a ``UserError`` whose
message is one line and names the input; anything else (a traceback) fails the test.
"""
from __future__ import annotations

import os
from contextlib import contextmanager

from hypothesis import HealthCheck, Phase, settings
from hypothesis import strategies as st

from textcore.errors import UserError, find_user_error

PROFILE = os.environ.get("HYPOTHESIS_PROFILE", "fast")
_COMMON = {"deadline": None, "database": None, "print_blob": True,
           "suppress_health_check": [HealthCheck.too_slow, HealthCheck.function_scoped_fixture,
                                     HealthCheck.data_too_large]}
settings.register_profile("fast", max_examples=20, derandomize=True, **_COMMON)
settings.register_profile("long", max_examples=1000, **_COMMON)
settings.load_profile(PROFILE)


def budget(fast: int, long: int) -> settings:
    """Examples of one property: ``fast`` in the default tier, ``long`` under ``make fuzz``; ``fast=0`` runs only
    the property's ``@example`` inputs in the default tier (for properties that start a process each)."""
    if PROFILE != "long" and fast == 0:
        return settings(phases=[Phase.explicit])
    return settings(max_examples=long if PROFILE == "long" else fast)


@contextmanager
def user_error_or(*names: str):
    """The block either succeeds or raises a UserError (possibly wrapped) of one line naming one of ``names``
    (a file, a key, a value). Yields a dict whose ``error`` is that message, or None after success."""
    outcome: dict = {"error": None}
    try:
        yield outcome
    except Exception as err:  # noqa: BLE001 - sorted out below: a user error passes, anything else fails
        user = find_user_error(err)
        if user is None:
            raise
        message = str(user)
        assert "\n" not in message.strip(), f"a user error of several lines: {message!r}"
        assert not names or any(str(n) in message for n in names), f"{message!r} names none of {names}"
        outcome["error"] = message


def is_user_error(err: BaseException) -> bool:
    return isinstance(err, UserError) or find_user_error(err) is not None


# -- texts -------------------------------------------------------------------------------------------------
# characters a user's file may hold: separators and quotes of every format, line breaks, accents, CJK, emoji;
# no NUL (no text format carries it) and no lone surrogate (no encoding can write it)
TEXT_ALPHABET = st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00")
SPECIAL = st.sampled_from([",", "\t", '"', "'", "\n", "\r\n", "\r", ";", "{", "}", "#", "\\", " ", "\ufeff",
                           "é", "日本", "😀", "NaN", "null", "None", "", "nan", "-", "0", "1.5"])
texts = st.one_of(
    st.text(TEXT_ALPHABET, max_size=30),
    st.lists(st.one_of(SPECIAL, st.text("abcdefgh ", min_size=1, max_size=6)), max_size=8).map("".join),
    st.sampled_from(["", " ", "  \t ", "same text", "Same text", "same text "]),
)
labels = st.one_of(st.none(), st.sampled_from(["", "a", "b", "0", "1", "1.0", "NaN", " ", "é", "x,y"]),
                   st.integers(-2, 3).map(str))


@st.composite
def tables(draw, max_rows: int = 5):
    """(texts, labels or None): 0 to ``max_rows`` rows, labels missing, odd or absent."""
    n = draw(st.integers(0, max_rows))
    rows = draw(st.lists(texts, min_size=n, max_size=n))
    if draw(st.booleans()):
        rows = rows + draw(st.lists(st.sampled_from(rows), max_size=2)) if rows else rows  # duplicates
    with_labels = draw(st.booleans())
    values = draw(st.lists(labels, min_size=len(rows), max_size=len(rows))) if with_labels else None
    return rows, values


FORMATS = ("csv", "tsv", "jsonl", "parquet", "txt")
ENCODINGS = ("utf-8", "utf-8-sig", "latin-1", "utf-16", "cp1252")
