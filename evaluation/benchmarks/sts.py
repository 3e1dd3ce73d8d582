"""Semantic textual similarity evaluation (docs/evaluation.md): STS12–16, STS-B, SICK-R.

Reads SentEval's ``downstream`` data layout and follows SentEval's reading conventions so the
numbers compare with SimCSE / ClusterNS tables:

- STS12–16: ``STS/STS1x-en-test/STS.input.<subset>.txt`` (one tab-separated sentence pair a line)
  and ``STS.gs.<subset>.txt`` (one gold score a line); pairs whose gold line is empty are unscored
  and dropped. The subsets are SentEval's lists (STS13 has no SMT: its input is not redistributable).
- STS-B: ``STS/STSBenchmark/sts-{dev,test}.csv``, tab-separated; column 4 is the score, columns 5
  and 6 the sentences.
- SICK-R: ``SICK/SICK_test_annotated.txt``, a header line, then sentence_A, sentence_B and
  relatedness_score in columns 1–3.
- Every sentence is split on whitespace and re-joined with single spaces before encoding, as
  SentEval's batcher hands ``' '.join(tokens)`` to the model.

Score: Spearman correlation between the cosine similarity of the two sentence embeddings and the
gold score, with no training (SimCSE's protocol). STS-B and SICK-R are scored the same way on their
test splits, as SimCSE reports them, not with SentEval's supervised regressor (its
``STSBenchmark``/``SICKRelatedness`` tasks train a classifier on the train split).
STS12–16 have several subsets, aggregated as ``all`` (every subset pooled into one
correlation; SimCSE's and ClusterNS's 'test' numbers), ``mean`` (mean of per-subset correlations)
or ``wmean`` (that mean weighted by subset size). Correlations are returned as fractions in
[-1, 1]; the Markdown table shows them x100.

CLI: ``python tools.py sts --model minilm --output /tmp/sts``, or for a trained run
``python tools.py sts --checkpoint <run>/checkpoints/best.ckpt --output <run>/sts``.
"""

from __future__ import annotations

import json
import sys
import time
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Sequence

import numpy as np
from scipy.stats import spearmanr

from datamodules.text_decoding import decoding
from textcore import console, run_folder
from textcore.errors import ConfigError, MissingFileError, UserError, exit_on_user_error

STS_YEARS: dict[str, tuple[str, ...]] = {
    "STS12": ("MSRpar", "MSRvid", "SMTeuroparl", "surprise.OnWN", "surprise.SMTnews"),
    "STS13": ("FNWN", "headlines", "OnWN"),
    "STS14": ("deft-forum", "deft-news", "headlines", "images", "OnWN", "tweet-news"),
    "STS15": ("answers-forums", "answers-students", "belief", "headlines", "images"),
    "STS16": ("answer-answer", "headlines", "plagiarism", "postediting", "question-question"),
}
STS_TASKS: tuple[str, ...] = ("STS12", "STS13", "STS14", "STS15", "STS16", "STSB", "SICKR")
AGGREGATIONS = ("all", "mean", "wmean")
# SentEval's task names, accepted as aliases.
_ALIASES = {"STSBenchmark": "STSB", "SICKRelatedness": "SICKR", "STS-B": "STSB", "SICK-R": "SICKR"}

Encode = Callable[[list[str]], "np.ndarray"]


class StsDataError(UserError, ValueError):
    """An STS file that is not in SentEval's layout; the message names the file and line."""


class StsDataMissingWarning(UserWarning):
    """A task's data folder is absent; the task is skipped and left out of the average."""


class _TaskMissing(Exception):
    pass


@dataclass
class PairSet:
    """Sentence pairs with gold scores: one STS subset, or a whole single-set task."""

    name: str
    sent1: list[str]
    sent2: list[str]
    gold: np.ndarray  # [n] float

    def __len__(self) -> int:
        return len(self.gold)


def _senteval_text(sentence: str) -> str:
    """SentEval tokenises by whitespace and the batcher re-joins tokens with one space."""
    return " ".join(sentence.split())


def _parse_score(text: str, path: Path, line_no: int) -> float:
    try:
        return float(text)
    except ValueError:
        raise StsDataError(
            f"{path}, line {line_no}: gold score {text!r} is not a number; "
            "the file is corrupt or not in SentEval's layout."
        ) from None


# --------------------------------------------------------------------------------------- readers


def read_sts_subset(folder: Path, subset: str) -> PairSet:
    """One STS12–16 subset; unscored pairs (empty gold line) are dropped as SentEval does."""
    input_path = folder / f"STS.input.{subset}.txt"
    gold_path = folder / f"STS.gs.{subset}.txt"
    for path in (input_path, gold_path):
        if not path.is_file():
            raise MissingFileError(
                f"{path} is missing although its task folder {folder} exists; the STS data is "
                "incomplete. Re-create the SentEval downstream folder or point --data-dir at a full copy."
            )
    # SentEval reads both files with read().splitlines(); the line counts must then agree.
    with decoding(input_path, "utf-8", option=None):
        input_lines = input_path.read_text(encoding="utf-8").splitlines()
    with decoding(gold_path, "utf-8", option=None):
        gold_lines = gold_path.read_text(encoding="utf-8").splitlines()
    if len(input_lines) != len(gold_lines):
        raise StsDataError(
            f"{input_path} has {len(input_lines)} lines but {gold_path} has {len(gold_lines)}; "
            "each sentence pair needs one gold line (empty when unscored)."
        )
    sent1, sent2, gold = [], [], []
    for line_no, (pair, score) in enumerate(zip(input_lines, gold_lines), start=1):
        if score == "":
            continue
        parts = pair.split("\t")
        if len(parts) != 2:
            raise StsDataError(
                f"{input_path}, line {line_no}: expected 2 tab-separated sentences, found {len(parts)} fields."
            )
        sent1.append(_senteval_text(parts[0]))
        sent2.append(_senteval_text(parts[1]))
        gold.append(_parse_score(score, gold_path, line_no))
    return PairSet(subset, sent1, sent2, np.asarray(gold, dtype=np.float64))


def _read_columns(path: Path, a: int, b: int, score: int, skip_header: bool, name: str) -> PairSet:
    """Tab-separated pairs; ``line.strip().split('\\t')`` as SentEval does (also drops CRLF)."""
    if not path.is_file():
        raise _TaskMissing(str(path))
    sent1, sent2, gold = [], [], []
    with decoding(path, "utf-8", option=None), path.open(encoding="utf-8") as handle:
        for line_no, line in enumerate(handle, start=1):
            if skip_header and line_no == 1:
                continue
            fields = line.strip().split("\t")
            if len(fields) <= max(a, b, score):
                raise StsDataError(
                    f"{path}, line {line_no}: expected at least {max(a, b, score) + 1} tab-separated "
                    f"columns, found {len(fields)}."
                )
            sent1.append(_senteval_text(fields[a]))
            sent2.append(_senteval_text(fields[b]))
            gold.append(_parse_score(fields[score], path, line_no))
    return PairSet(name, sent1, sent2, np.asarray(gold, dtype=np.float64))


def read_stsb(data_dir: str | Path, split: str = "test") -> PairSet:
    """STS-B ``sts-<split>.csv``: columns genre, file, year, id, score, sentence1, sentence2."""
    return _read_columns(Path(data_dir) / "STS" / "STSBenchmark" / f"sts-{split}.csv", 5, 6, 4, False, split)


def read_sickr(data_dir: str | Path) -> PairSet:
    """SICK-R test: header, then pair_ID, sentence_A, sentence_B, relatedness_score, judgment."""
    return _read_columns(Path(data_dir) / "SICK" / "SICK_test_annotated.txt", 1, 2, 3, True, "test")


def load_task(data_dir: str | Path, task: str) -> list[PairSet]:
    """The pair sets of one task (several subsets for STS12–16, one set otherwise)."""
    data_dir = Path(data_dir)
    if task in STS_YEARS:
        folder = data_dir / "STS" / f"{task}-en-test"
        if not folder.is_dir():
            raise _TaskMissing(str(folder))
        return [read_sts_subset(folder, subset) for subset in STS_YEARS[task]]
    if task == "STSB":
        return [read_stsb(data_dir, "test")]
    if task == "SICKR":
        return [read_sickr(data_dir)]
    raise ConfigError(f"unknown STS task '{task}'; choose from {STS_TASKS}")


# --------------------------------------------------------------------------------------- scoring


def _as_numpy(embeddings) -> np.ndarray:
    if hasattr(embeddings, "detach"):  # torch.Tensor without importing torch here
        embeddings = embeddings.detach().float().cpu().numpy()
    return np.asarray(embeddings, dtype=np.float64)


def cosine_scores(encode: Encode, sets: Sequence[PairSet]) -> list[np.ndarray]:
    """Cosine similarity per pair for each set; each distinct sentence is encoded once."""
    unique = list(dict.fromkeys(s for pairs in sets for s in (*pairs.sent1, *pairs.sent2)))
    emb = _as_numpy(encode(unique))  # [u, d]
    if emb.ndim != 2 or emb.shape[0] != len(unique):
        raise ValueError(
            f"encode() returned an array of shape {emb.shape} for {len(unique)} sentences; "
            "it must return one row per input sentence, in input order."
        )
    emb = emb / np.clip(np.linalg.norm(emb, axis=1, keepdims=True), 1e-12, None)  # [u, d]
    row = {s: i for i, s in enumerate(unique)}
    out = []
    for pairs in sets:
        a = emb[[row[s] for s in pairs.sent1]]  # [n, d]
        b = emb[[row[s] for s in pairs.sent2]]  # [n, d]
        out.append((a * b).sum(axis=1))  # [n]
    return out


def spearman(x: np.ndarray, y: np.ndarray) -> float:
    return float(spearmanr(x, y).statistic)


def aggregate(scores: Sequence[np.ndarray], golds: Sequence[np.ndarray]) -> dict[str, float]:
    """The three SentEval aggregations of subset-level predictions against gold scores."""
    per_subset = np.array([spearman(s, g) for s, g in zip(scores, golds)])
    sizes = np.array([len(g) for g in golds])
    return {
        "all": spearman(np.concatenate(scores), np.concatenate(golds)),
        "mean": float(per_subset.mean()),
        "wmean": float(np.average(per_subset, weights=sizes)),
    }


def evaluate_task(encode: Encode, sets: Sequence[PairSet], aggregation: str = "all") -> dict:
    """Headline ``spearman`` for one task, plus every aggregation and the per-subset values."""
    scores = cosine_scores(encode, sets)
    golds = [pairs.gold for pairs in sets]
    result = {"n": int(sum(len(g) for g in golds)), **aggregate(scores, golds)}
    result["spearman"] = result[aggregation]
    if len(sets) > 1:
        result["subsets"] = {
            pairs.name: {"spearman": spearman(s, pairs.gold), "n": len(pairs)} for pairs, s in zip(sets, scores)
        }
    return result


def _canonical(task: str) -> str:
    task = _ALIASES.get(task, task)
    if task not in STS_TASKS:
        raise ConfigError(f"unknown STS task '{task}'; choose from {STS_TASKS} (or {sorted(_ALIASES)})")
    return task


def evaluate_sts(
    encode: Encode,
    data_dir: str | Path,
    tasks: Sequence[str] = STS_TASKS,
    aggregation: str = "all",
    log: Callable[[str], None] | None = None,
) -> dict:
    """Evaluate ``encode`` (list of texts -> [n, d] array or tensor) on the STS tasks.

    Returns ``{"aggregation", "tasks": {task: {"spearman", "all", "mean", "wmean", "n",
    ["subsets"]}}, "avg", "avg_over", "skipped"}``. ``spearman`` is the value under
    ``aggregation`` (single-set tasks give the same value for all three). A task whose folder or
    file is missing is skipped with an ``StsDataMissingWarning`` and listed in ``skipped``;
    ``avg`` is then the mean over ``avg_over`` only.
    """
    if aggregation not in AGGREGATIONS:
        raise ConfigError(f"aggregation must be one of {AGGREGATIONS}, got '{aggregation}'")
    data_dir = Path(data_dir)
    if not data_dir.is_dir():
        raise MissingFileError(
            f"STS data folder {data_dir} does not exist; pass the SentEval 'downstream' folder "
            "(holding STS/ and SICK/) as data_dir / --data-dir."
        )
    results: dict = {"aggregation": aggregation, "tasks": {}, "skipped": {}}
    for task in map(_canonical, tasks):
        try:
            sets = load_task(data_dir, task)
        except _TaskMissing as missing:
            warnings.warn(f"STS task {task} skipped: {missing} not found", StsDataMissingWarning, stacklevel=2)
            results["skipped"][task] = f"{missing} not found"
            continue
        start = time.perf_counter()
        results["tasks"][task] = evaluate_task(encode, sets, aggregation)
        if log:
            log(f"{task}: {100 * results['tasks'][task]['spearman']:.2f} ({time.perf_counter() - start:.1f}s)")
    if not results["tasks"]:
        raise MissingFileError(
            f"none of the STS tasks {list(tasks)} was found under {data_dir}; expected SentEval's "
            "layout (STS/STS12-en-test, ..., STS/STSBenchmark, SICK/). Check data_dir / --data-dir."
        )
    results["avg_over"] = list(results["tasks"])
    results["avg"] = float(np.mean([r["spearman"] for r in results["tasks"].values()]))
    return results


def stsb_dev_spearman(encode: Encode, data_dir: str | Path) -> float:
    """Spearman on the STS-B dev set (model selection during SimCSE / ClusterNS training)."""
    path = Path(data_dir) / "STS" / "STSBenchmark" / "sts-dev.csv"
    try:
        dev = read_stsb(data_dir, "dev")
    except _TaskMissing:
        raise MissingFileError(
            f"STS-B dev file {path} not found; set the data_dir to SentEval's 'downstream' folder."
        ) from None
    (scores,) = cosine_scores(encode, [dev])
    return spearman(scores, dev.gold)


# --------------------------------------------------------------------------------------- report


def markdown_table(results: dict, label: str) -> str:
    """Headline table (Spearman x100) and a per-subset table for STS12–16."""
    names = results["avg_over"]
    avg_name = "Avg." if len(names) == len(STS_TASKS) else f"Avg. ({len(names)} tasks)"
    head = "| Model | " + " | ".join(names) + f" | {avg_name} |"
    rule = "|" + "---|" * (len(names) + 2)
    row = f"| {label} | " + " | ".join(f"{100 * results['tasks'][t]['spearman']:.2f}" for t in names)
    row += f" | {100 * results['avg']:.2f} |"
    lines = [
        "Protocol: cosine similarity of the two embeddings, no training (SimCSE's evaluation); STS-B and SICK-R "
        "scored the same way on their test splits, not with SentEval's supervised regressor.",
        "",
        f"Spearman correlation x100 of cosine similarity; STS12–16 aggregation: `{results['aggregation']}`"
        " (all = subsets pooled, mean = mean of subsets, wmean = size-weighted mean); STS-B and SICK-R: test set.",
        "",
        head,
        rule,
        row,
    ]
    if results["skipped"]:
        lines += ["", "Skipped (data missing): " + ", ".join(f"{t} ({why})" for t, why in results["skipped"].items())]
    detail = [(t, r) for t, r in results["tasks"].items() if "subsets" in r]
    if detail:
        lines += ["", "| Task | Subset | n | Spearman |", "|---|---|---|---|"]
        for task, r in detail:
            for name, sub in r["subsets"].items():
                lines.append(f"| {task} | {name} | {sub['n']} | {100 * sub['spearman']:.2f} |")
            for agg in AGGREGATIONS:
                lines.append(f"| {task} | *{agg}* | {r['n']} | {100 * r[agg]:.2f} |")
    return "\n".join(lines) + "\n"


def _default_data_dir() -> Path:
    from datamodules.download.catalogue import data_root

    return data_root() / "senteval" / "downstream"


# --------------------------------------------------------------------------------------- encoders


def token_limit(encoder) -> int:
    """The longest input the backbone takes: SimCSE's evaluation does not truncate at 32 tokens."""
    return min(int(encoder.tokenizer.model_max_length), int(encoder.backbone.config.max_position_embeddings))


def encoder_encode_fn(
    encoder, pooling: str | None = None, batch_size: int = 128, max_length: int | None = None
) -> Encode:
    """``encode`` for :func:`evaluate_sts` from a ``TextEncoder`` (e.g. a training module's).

    Each call truncates at ``max_length`` (default: :func:`token_limit`) with ``pooling`` (default:
    the encoder's), and puts the encoder's own ``max_length`` back afterwards, so a model being
    trained keeps its training truncation.
    """
    limit = max_length or token_limit(encoder)

    def encode(texts: list[str]):
        saved = encoder.max_length
        encoder.max_length = limit
        try:
            return encoder.encode(texts, batch_size=batch_size, pooling=pooling)
        finally:
            encoder.max_length = saved

    return encode


@exit_on_user_error
def main(argv: Sequence[str] | None = None) -> dict:
    parser = console.tool_parser("sts", __doc__)
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--model", help="run folder, .ckpt, exported or Hugging Face model folder, Hub name, "
                        "'minilm' or 'tiny' (evaluation.model_io.load)")
    source.add_argument(
        "--checkpoint",
        type=Path,
        help="a Lightning checkpoint of this project (e.g. <run>/checkpoints/best.ckpt): its encoder and eval pooling",
    )
    parser.add_argument(
        "--pooling",
        default=None,
        choices=("mean", "cls", "cls_before_pooler"),
        help="default: the model's own (a run's eval pooling, an exported folder's, else mean)",
    )
    parser.add_argument("--data-dir", type=Path, default=_default_data_dir(), help="SentEval 'downstream' folder")
    parser.add_argument("--aggregation", default="all", choices=AGGREGATIONS,
                        help="how STS12-16's subsets make one score: all pooled, their mean, or weighted mean")
    parser.add_argument("--tasks", nargs="+", default=list(STS_TASKS), help="STS tasks to evaluate")
    parser.add_argument("--batch-size", type=int, default=128, help="texts per encoder batch")
    parser.add_argument(
        "--max-length",
        type=int,
        default=None,
        help="token limit; default: the backbone's position limit (SimCSE's evaluation does not truncate)",
    )
    parser.add_argument("--output", type=Path, default=None, help="folder for sts.md and sts.json")
    run_folder.add_trust_option(parser)
    args = parser.parse_args(argv)

    from evaluation.model_io.load import load_encoder

    model_name = str(args.checkpoint if args.checkpoint is not None else args.model)
    encoder, pooling = load_encoder(model_name, args.pooling, args.trust_checkpoint)
    encoder.pooling = pooling  # encode() then pools this way; the MLP exists if training used `cls`
    encoder.max_length = args.max_length or token_limit(encoder)

    def encode(texts: list[str]):
        return encoder.encode(texts, batch_size=args.batch_size)

    def log(message: str) -> None:
        print(message, file=sys.stderr, flush=True)

    start = time.perf_counter()
    results = evaluate_sts(encode, args.data_dir, args.tasks, args.aggregation, log=log)
    wall = time.perf_counter() - start
    label = f"{model_name} ({pooling})"
    table = markdown_table(results, label)
    print(table)
    print(f"wall time: {wall:.1f}s", file=sys.stderr)
    if args.output:
        args.output.mkdir(parents=True, exist_ok=True)
        (args.output / "sts.md").write_text(table, encoding="utf-8")
        meta = {
            "model": model_name,
            "pooling": pooling,
            "max_length": encoder.max_length,
            "data_dir": str(args.data_dir),
            "wall_seconds": round(wall, 1),
        }
        (args.output / "sts.json").write_text(json.dumps({**meta, **results}, indent=2), encoding="utf-8")
    return results


if __name__ == "__main__":
    console.run_cli(main)
