"""STS evaluation: SentEval reading conventions, aggregations, missing data, seven-task average.

The fake encoder maps a sentence ending in ``@<angle>`` to the unit vector (cos a, sin a); a pair
("... @0", "... @a") therefore has cosine cos(a), so every system score is known in advance and the
expected correlations are computed here from those known scores, not from the code under test.
"""

from __future__ import annotations

import json
import math
import warnings
from pathlib import Path

import numpy as np
import pytest
from scipy.stats import spearmanr

from ctclust.commands.sts import main
from evaluation.benchmarks.sts import (
    STS_TASKS,
    STS_YEARS,
    StsDataMissingWarning,
    evaluate_sts,
    load_task,
    stsb_dev_spearman,
)

REAL_DATA = Path(__file__).resolve().parents[3].parent / "shared" / "data" / "senteval" / "downstream"


class FakeEncoder:
    """Embeds ``"<words> @<angle>"`` as (cos angle, sin angle); records every text it sees."""

    def __init__(self):
        self.seen: list[str] = []

    def __call__(self, texts: list[str]) -> np.ndarray:
        self.seen.extend(texts)
        angles = np.array([float(t.rsplit("@", 1)[1]) for t in texts])
        return np.stack([np.cos(angles), np.sin(angles)], axis=1)


def rho(x, y) -> float:
    return float(spearmanr(x, y).statistic)


def pair_line(tag: str, angle: float) -> str:
    return f"first  {tag} @0\tsecond {tag}   @{angle}"


def write_year(root: Path, year: str, subsets: dict[str, list[tuple[float, float | None]]]) -> dict[str, tuple]:
    """STS-layout files; each pair is (angle, gold or None for an unscored pair).

    Returns per subset the (system scores, gold) lists of the scored pairs.
    """
    folder = root / "STS" / f"{year}-en-test"
    folder.mkdir(parents=True)
    expected = {}
    for name, pairs in subsets.items():
        inputs = [pair_line(f"{year}-{name}-{i}", angle) for i, (angle, _) in enumerate(pairs)]
        golds = ["" if g is None else f"{g:.3f}" for _, g in pairs]
        (folder / f"STS.input.{name}.txt").write_text("\n".join(inputs) + "\n", encoding="utf-8")
        (folder / f"STS.gs.{name}.txt").write_text("\n".join(golds) + "\n", encoding="utf-8")
        scored = [(math.cos(a), g) for a, g in pairs if g is not None]
        expected[name] = ([s for s, _ in scored], [g for _, g in scored])
    return expected


def write_stsb(root: Path, split: str, pairs: list[tuple[float, float]]) -> list[float]:
    folder = root / "STS" / "STSBenchmark"
    folder.mkdir(parents=True, exist_ok=True)
    rows = [
        f"main-captions\tMSRvid\t2012test\t{i:04d}\t{g:.3f}\ta {split} {i} @0\tb {split} {i} @{a}"
        for i, (a, g) in enumerate(pairs)
    ]
    (folder / f"sts-{split}.csv").write_text("\n".join(rows) + "\n", encoding="utf-8")
    return [math.cos(a) for a, _ in pairs]


def write_sick(root: Path, pairs: list[tuple[float, float]]) -> list[float]:
    folder = root / "SICK"
    folder.mkdir(parents=True)
    lines = ["pair_ID\tsentence_A\tsentence_B\trelatedness_score\tentailment_judgment"]
    lines += [f"{i}\tleft {i} @0\tright {i} @{a}\t{g}\tNEUTRAL" for i, (a, g) in enumerate(pairs)]
    # SICK_test_annotated.txt ships with CRLF line endings.
    (folder / "SICK_test_annotated.txt").write_bytes(("\r\n".join(lines) + "\r\n").encode("utf-8"))
    return [math.cos(a) for a, _ in pairs]


# Angles in [0, pi]: a larger angle means a smaller cosine.
STS13 = {
    "FNWN": [(1.2, 1.0), (0.9, 2.0), (0.5, 3.0), (0.1, 4.0)],  # rho = +1
    "headlines": [(0.1, 0.0), (0.4, 1.0), (2.9, None), (0.8, 2.0), (1.3, 3.0)],  # rho = -1, one unscored
    "OnWN": [(0.2, 5.0), (0.6, 3.5), (0.4, 4.5), (1.0, 1.0), (0.8, 0.5)],  # rho = 0.9 by hand
}


def test_aggregations_match_naive_computation(tmp_path):
    expected = write_year(tmp_path, "STS13", STS13)
    enc = FakeEncoder()
    result = evaluate_sts(enc, tmp_path, tasks=["STS13"], aggregation="all")["tasks"]["STS13"]

    # Hand values: FNWN +1, headlines -1, OnWN ranks sys (5,3,4,1,2) vs gold (5,3,4,2,1): d^2 sum 2.
    onwn = 1 - 6 * 2 / (5 * (25 - 1))
    assert result["subsets"]["FNWN"]["spearman"] == pytest.approx(1.0)
    assert result["subsets"]["headlines"]["spearman"] == pytest.approx(-1.0)
    assert result["subsets"]["OnWN"]["spearman"] == pytest.approx(onwn)
    assert result["mean"] == pytest.approx((1 - 1 + onwn) / 3)
    assert result["wmean"] == pytest.approx((4 * 1 + 4 * -1 + 5 * onwn) / 13)
    pooled_sys = sum((expected[n][0] for n in STS13), [])
    pooled_gold = sum((expected[n][1] for n in STS13), [])
    assert result["all"] == pytest.approx(rho(pooled_sys, pooled_gold))
    assert result["spearman"] == result["all"]
    assert result["n"] == 13
    # The three aggregations really differ on this set, so a mix-up would show.
    assert len({round(result[k], 6) for k in ("all", "mean", "wmean")}) == 3


@pytest.mark.parametrize("aggregation", ["all", "mean", "wmean"])
def test_headline_follows_requested_aggregation(tmp_path, aggregation):
    write_year(tmp_path, "STS13", STS13)
    out = evaluate_sts(FakeEncoder(), tmp_path, tasks=["STS13"], aggregation=aggregation)
    assert out["aggregation"] == aggregation
    assert out["tasks"]["STS13"]["spearman"] == out["tasks"]["STS13"][aggregation]
    assert out["avg"] == out["tasks"]["STS13"][aggregation]


def test_blank_gold_lines_are_dropped_and_text_is_whitespace_joined(tmp_path):
    write_year(tmp_path, "STS13", STS13)
    (sets,) = [load_task(tmp_path, "STS13")]
    headlines = {s.name: s for s in sets}["headlines"]
    assert len(headlines) == 4
    assert headlines.gold.tolist() == [0.0, 1.0, 2.0, 3.0]
    # SentEval splits on whitespace and re-joins with single spaces.
    assert headlines.sent1[0] == "first STS13-headlines-0 @0"
    assert headlines.sent2[0] == "second STS13-headlines-0 @0.1"

    enc = FakeEncoder()
    evaluate_sts(enc, tmp_path, tasks=["STS13"])
    assert not any("STS13-headlines-2 " in t for t in enc.seen), "unscored pair was encoded"


def test_missing_folder_is_skipped_with_warning_and_average_says_so(tmp_path):
    write_year(tmp_path, "STS13", STS13)
    sys_b = write_stsb(tmp_path, "test", [(0.1, 4.0), (0.5, 5.0), (0.9, 1.0), (1.4, 2.0)])
    with pytest.warns(StsDataMissingWarning, match="STS12"):
        out = evaluate_sts(FakeEncoder(), tmp_path, tasks=["STS12", "STS13", "STSB"])
    assert "STS12" in out["skipped"] and "STS12" not in out["tasks"]
    assert out["avg_over"] == ["STS13", "STSB"]
    stsb = rho(sys_b, [4.0, 5.0, 1.0, 2.0])
    assert out["tasks"]["STSB"]["spearman"] == pytest.approx(stsb)
    assert out["avg"] == pytest.approx((out["tasks"]["STS13"]["all"] + stsb) / 2)


def test_no_task_found_is_an_error(tmp_path):
    with pytest.raises(FileNotFoundError, match="none of the STS tasks"):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", StsDataMissingWarning)
            evaluate_sts(FakeEncoder(), tmp_path)


def _seven_task_tree(root: Path) -> dict[str, float]:
    """Every task of the seven, with the expected headline ('all') correlation of each."""
    rng = np.random.default_rng(0)
    expected = {}
    for year, subsets in STS_YEARS.items():
        data = {name: [(float(a), float(g)) for a, g in rng.uniform([0, 0], [3, 5], size=(6, 2))] for name in subsets}
        sys_gold = write_year(root, year, data)
        expected[year] = rho(sum((sys_gold[n][0] for n in subsets), []), sum((sys_gold[n][1] for n in subsets), []))
    stsb_pairs = [(0.2, 4.0), (0.6, 4.5), (1.0, 2.0), (1.5, 0.5), (2.0, 1.0)]
    expected["STSB"] = rho(write_stsb(root, "test", stsb_pairs), [g for _, g in stsb_pairs])
    sick_pairs = [(0.3, 4.2), (0.7, 4.9), (1.1, 3.0), (2.5, 1.2)]
    expected["SICKR"] = rho(write_sick(root, sick_pairs), [g for _, g in sick_pairs])
    return expected


def test_seven_task_average(tmp_path):
    expected = _seven_task_tree(tmp_path)
    out = evaluate_sts(FakeEncoder(), tmp_path)
    assert out["avg_over"] == list(STS_TASKS)
    for task in STS_TASKS:
        assert out["tasks"][task]["spearman"] == pytest.approx(expected[task]), task
    assert out["avg"] == pytest.approx(np.mean([expected[t] for t in STS_TASKS]))
    assert out["tasks"]["SICKR"]["n"] == 4  # header line skipped, CRLF stripped
    assert out["skipped"] == {}


def test_stsb_dev_spearman(tmp_path):
    pairs = [(0.1, 5.0), (0.3, 3.0), (0.2, 4.0), (1.0, 1.0), (0.5, 2.5)]
    sys_dev = write_stsb(tmp_path, "dev", pairs)
    write_stsb(tmp_path, "test", [(3.0, 5.0), (0.1, 0.0)])  # must not be read for dev
    assert stsb_dev_spearman(FakeEncoder(), tmp_path) == pytest.approx(rho(sys_dev, [g for _, g in pairs]))
    assert stsb_dev_spearman(FakeEncoder(), tmp_path) == pytest.approx(1.0)
    with pytest.raises(FileNotFoundError, match="sts-dev.csv"):
        stsb_dev_spearman(FakeEncoder(), tmp_path / "nowhere")


def test_bad_input_errors_name_the_file(tmp_path):
    write_year(tmp_path, "STS13", STS13)
    gold = tmp_path / "STS" / "STS13-en-test" / "STS.gs.OnWN.txt"
    gold.write_text("1.0\n2.0\n", encoding="utf-8")
    with pytest.raises(ValueError, match="STS.gs.OnWN.txt"):
        evaluate_sts(FakeEncoder(), tmp_path, tasks=["STS13"])
    with pytest.raises(ValueError, match="aggregation"):
        evaluate_sts(FakeEncoder(), tmp_path, tasks=["STS13"], aggregation="median")
    with pytest.raises(ValueError, match="unknown STS task"):
        evaluate_sts(FakeEncoder(), tmp_path, tasks=["STS17"])


def test_encoder_returning_wrong_row_count_is_an_error(tmp_path):
    write_stsb(tmp_path, "test", [(0.1, 1.0), (0.2, 2.0)])
    with pytest.raises(ValueError, match="one row per input sentence"):
        evaluate_sts(lambda texts: np.ones((1, 2)), tmp_path, tasks=["STSB"])


def test_accepts_torch_tensor_embeddings(tmp_path):
    torch = pytest.importorskip("torch")
    pairs = [(0.1, 5.0), (0.3, 3.0), (0.2, 4.0)]
    write_stsb(tmp_path, "test", pairs)
    fake = FakeEncoder()
    out = evaluate_sts(lambda texts: torch.from_numpy(fake(texts)).float(), tmp_path, tasks=["STSB"])
    assert out["tasks"]["STSB"]["spearman"] == pytest.approx(1.0)


@pytest.mark.skipif(not REAL_DATA.is_dir(), reason="shared SentEval data not present")
def test_real_files_give_senteval_pair_counts():
    # Counts of scored pairs as SentEval reads them (shared/data/SOURCES.md).
    counts = {"STS12": 3108, "STS13": 1500, "STS14": 3750, "STS15": 3000, "STS16": 1186, "STSB": 1379, "SICKR": 4927}
    for task, n in counts.items():
        assert sum(len(s) for s in load_task(REAL_DATA, task)) == n, task


class _FakeTextEncoder:
    """Stands in for TextEncoder in the CLI test so no model is loaded."""

    def __init__(self):
        from types import SimpleNamespace

        self.tokenizer = SimpleNamespace(model_max_length=512)
        self.backbone = SimpleNamespace(config=SimpleNamespace(max_position_embeddings=128))
        self.max_length = 32
        self.fake = FakeEncoder()

    def eval(self):
        return self

    def encode(self, texts, batch_size=128):
        return self.fake(texts)


def test_cli_writes_table_and_json(tmp_path, capsys, monkeypatch):
    import textcore.encoding.encoder as encoder_module

    made = {}

    def from_name(name, settings, **kwargs):
        made.update(name=name, pooling=settings.pooling, encoder=_FakeTextEncoder())
        return made["encoder"]

    monkeypatch.setattr(encoder_module.TextEncoder, "from_name", staticmethod(from_name))
    pairs = [(0.1, 5.0), (0.3, 3.0), (0.2, 4.0), (1.0, 1.0)]
    sys_scores = write_stsb(tmp_path, "test", pairs)
    out_dir = tmp_path / "out"
    results = main(
        [
            "--model",
            "some/model",
            "--pooling",
            "cls_before_pooler",
            "--data-dir",
            str(tmp_path),
            "--tasks",
            "STSB",
            "--output",
            str(out_dir),
        ]
    )
    assert made["name"] == "some/model" and made["pooling"] == "cls_before_pooler"
    assert made["encoder"].max_length == 128  # no 32-token truncation at evaluation, as in SimCSE
    expected = 100 * rho(sys_scores, [g for _, g in pairs])
    table = (out_dir / "sts.md").read_text()
    assert "aggregation: `all`" in table
    assert f"| some/model (cls_before_pooler) | {expected:.2f} | {expected:.2f} |" in table
    saved = json.loads((out_dir / "sts.json").read_text())
    assert saved["aggregation"] == "all" and saved["tasks"]["STSB"]["spearman"] == pytest.approx(results["avg"])
    assert table.strip() in capsys.readouterr().out


@pytest.mark.slow
@pytest.mark.skipif(not REAL_DATA.is_dir(), reason="shared SentEval data not present")
def test_minilm_on_real_stsb_dev():
    from textcore.encoding.encoder import EncoderSettings, TextEncoder

    encoder = TextEncoder.from_name("minilm", EncoderSettings.outside_training("mean", 128))
    score = stsb_dev_spearman(lambda texts: encoder.encode(texts, batch_size=128), REAL_DATA)
    # all-MiniLM-L6-v2 is trained on paraphrase data and scores well above 0.8 on STS-B.
    assert score > 0.8
