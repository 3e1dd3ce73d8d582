"""Every repository path README.md, RESULTS.md, BENCHMARKS.md and docs/ name exists: a moved or removed file or
folder fails here, in backticks or in running text (`scripts/bench/gpu.py`, docs/scale.md, `conf/dataset/`).

A path is checked when its first folder is one of the repository's own (a path under `textcore/`, `conf/`, ...),
when it is relative to the page's folder (docs/README.md's `methods/sccl.md`), or when it names a source file
(`.py`, `.sh`, `.yaml`, `.md`, ...) anywhere else, so that a file under a folder that is gone is caught too.
Not checked: what a user or a run creates (`logs/`, `data/`, `outputs/`, a run folder's `checkpoints/last.ckpt`,
`plots/`, `embeddings/`, the GPU bundle `.gpu/`), placeholders (`<run>/...`, `$OUT/...`, `.../data`), URLs and
absolute paths, a path at a commit (`git show 3b1891e:scripts/<retired>.sh`), and a file whose content the page
shows for the reader to write (a "`path`:" line before a code block).
docs/history/ is not read: it records what was, under the names of its date."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCS = [ROOT / "README.md", ROOT / "RESULTS.md", ROOT / "BENCHMARKS.md",
        *sorted(p for p in (ROOT / "docs").rglob("*.md") if "history" not in p.relative_to(ROOT / "docs").parts)]
# made by a user, a run or a command, never part of the checkout
MADE_LATER = {"logs", "data", "outputs", "multirun", "wandb", "exported", "checkpoints", "embeddings", "plots", "csv",
              ".hydra", ".gpu", ".venv", ".submitit", ".ranks"}
SOURCE = (".py", ".sh", ".bash", ".yaml", ".yml", ".md", ".toml", ".cfg", ".txt", ".json", ".ipynb")
# a run of path characters with a slash, not inside a word, a URL, an absolute path or after a placeholder
PATH = re.compile(r"(?<![\w.$<>~/:@{-])((?:\.\.?/)*[\w.*-]+/(?:[\w.*-]+/)*[\w.*-]*)")
REPOSITORY = {p.name for p in ROOT.iterdir()} - MADE_LATER
ALTERNATIVES = re.compile(r"/\.\w+(/|$)")  # aggregate.md/.csv/.json: one name, several extensions


def shown_files(text: str) -> set[str]:
    """Files whose content the page shows for the reader to write: "`path`:" (and a note) just before a code block."""
    lines = text.splitlines()
    shown = set()
    for i, line in enumerate(lines):
        match = re.match(r"`([^`]+)`.*:$", line.strip())
        following = [x for x in lines[i + 1:i + 3] if x.strip()]
        if match and following and following[0].lstrip().startswith("```"):
            shown.add(match.group(1))
    return shown


def _exists(path: Path, placeholder_follows: bool) -> bool:
    if placeholder_follows:  # `conf/experiment/sccl_<dataset>.yaml`: something of that beginning
        return any(path.parent.glob(path.name + "*"))
    if any(c in path.name for c in "*?["):
        return any(path.parent.glob(path.name))
    return path.exists()


def missing_paths(text: str, page: Path) -> list[str]:
    """``line: path`` for every path ``text`` (the content of ``page``) names that is not there."""
    shown, missing = shown_files(text), []
    for n, line in enumerate(text.splitlines(), 1):
        for match in PATH.finditer(line):
            path = match.group(1).rstrip(".,;:")
            if path.startswith("...") or path in shown or ALTERNATIVES.search(path):
                continue
            first = re.sub(r"^(\./)+", "", path).split("/")[0]
            relative = (page.parent / first).exists() and page.parent != ROOT
            if first in MADE_LATER and not relative:
                continue
            if not (first in REPOSITORY or relative or path.endswith(SOURCE)):
                continue
            follows = line[match.end(1):match.end(1) + 1] == "<"
            if not any(_exists(base / path, follows) for base in (ROOT, page.parent)):
                missing.append(f"{n}: {path}")
    return missing


@pytest.mark.parametrize("page", DOCS, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_path_a_page_names_exists(page):
    missing = missing_paths(page.read_text(), page)
    assert missing == [], f"{page.relative_to(ROOT)} names paths that are not in the repository: {missing}"


def test_a_moved_or_removed_path_fails():
    page = ROOT / "docs" / "gpu.md"
    text = ("Run `python scripts/bench_grad_cache.py` (see docs/no_such_page.md and scripts/bench/gpu.py); the\n"
            "settings live in textcore/no_such_module.py and `conf/no_such_group/`; the encoder is\n"
            "utils/encoder.py, and the GPU guide is methods/../gpu.md.\n")
    assert missing_paths(text, page) == ["1: scripts/bench_grad_cache.py", "1: docs/no_such_page.md",
                                         "2: textcore/no_such_module.py", "2: conf/no_such_group/",
                                         "3: utils/encoder.py"]


def test_what_a_user_or_a_run_makes_is_not_checked():
    page = ROOT / "README.md"
    text = ("A run writes `logs/train/runs/sccl_demo/<time>/`, `<run>/checkpoints/last.ckpt`, checkpoints/best.ckpt,\n"
            "plots/embeddings_tsne.png and predictions.csv; data/short_text/x.csv and .gpu/site come from a command;\n"
            "$OUT/session.md, https://github.com/amazon-science/sccl/blob/main/x.py, /abs/path/x.py, the ratio\n"
            "steps/s, `conf/experiment/sccl_<dataset>.yaml`, `scripts/bench/` and `docs/methods/*.md` are fine.\n"
            "`lightning_modules/toy/module.py`:\n\n```python\nx = 1\n```\n")
    assert missing_paths(text, page) == []
