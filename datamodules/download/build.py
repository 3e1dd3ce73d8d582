"""What the recipes read, made from downloaded files (the ``build`` of a catalogue item)."""
from __future__ import annotations

import tarfile
import tempfile
from pathlib import Path
from typing import Callable

from datamodules.download.catalogue import BY_NAME, Item
from textcore.errors import ConfigError

WIKI_SAMPLE_LINES = 11914   # the length of the sample this project's results were measured on
NLI_SAMPLE_PAIRS = 20000
# SCCL's views as its authors made them: a contextual substitution of 20 % of the words by each of two masked LMs
SCCL_VIEW_MODELS = ("roberta-base", "bert-base-uncased")
SCCL_VIEW_SHARE = 0.2


def _input(root: Path, item: Item, index: int = 0) -> Path:
    return root / BY_NAME[item.inputs[index]].path


def wiki_sample(item: Item, root: Path, log: Callable[[str], None]) -> None:
    source, out = _input(root, item), root / item.path
    with open(source, encoding="utf-8") as lines, open(out.with_suffix(".tmp"), "w", encoding="utf-8") as handle:
        for number, line in enumerate(lines):
            if number == WIKI_SAMPLE_LINES:
                break
            handle.write(line)
    out.with_suffix(".tmp").replace(out)


def nli_pairs(item: Item, root: Path, log: Callable[[str], None]) -> None:
    from datamodules.prepare import nli_pairs as make_pairs

    make_pairs(_input(root, item), root / item.path)


def nli_sample(item: Item, root: Path, log: Callable[[str], None]) -> None:
    import pandas as pd

    pairs = pd.read_csv(_input(root, item), dtype=str, keep_default_na=False)
    pairs.sample(n=min(NLI_SAMPLE_PAIRS, len(pairs)), random_state=0).to_csv(root / item.path, index=False)


def googlenews_ts(item: Item, root: Path, log: Callable[[str], None]) -> None:
    """label, text0, text1 like the authors' other files; text1 made by EDA where their TS.csv has none."""
    import pandas as pd

    source = _input(root, item)
    table = pd.read_csv(source, dtype=str, keep_default_na=False)
    text = next((c for c in ("text0", "text") if c in table.columns), None)
    if text is None or "label" not in table.columns:
        raise ConfigError(f"'{source}' has columns {list(table.columns)}; expected label and text0 (or text) as in "
                          "the AECL authors' other files. Check the file at its URL and build googlenews_ts.csv by "
                          "hand (docs/data.md).")
    out = pd.DataFrame({"label": table["label"], "text0": table[text]})
    if "text1" in table.columns:
        out["text1"] = table["text1"]
    else:
        from datamodules.augment.columns import augment_file, augment_options

        log(f"{source.name} has no EDA column: making one with `python tools.py augment --method eda`")
        with tempfile.TemporaryDirectory(dir=root) as tmp:
            plain, augmented = Path(tmp) / "ts.csv", Path(tmp) / "ts_eda.csv"
            out.to_csv(plain, index=False)
            argv = [str(plain), "--output", str(augmented), "--method", "eda", "--copies", "1", "--text-column",
                    "text0", "--seed", "0", "--no-progress"]
            augment_file(augment_options(plain, "eda", output=augmented, copies=1, text_column="text0", seed=0,
                                         no_progress=True), argv)
            out["text1"] = pd.read_csv(augmented, dtype=str, keep_default_na=False)["eda_1"]
    out.to_csv(root / item.path, index=False)


def sccl_views(item: Item, root: Path, log: Callable[[str], None]) -> None:
    """The authors' layout, ``label, text, text1, text2``: the text and one copy from each of
    :data:`SCCL_VIEW_MODELS` (``datamodules.augment.columns.contextual_copies``, the augment tool's substitution)."""
    import pandas as pd

    from datamodules.augment.columns import CONTEXTUAL, contextual_copies

    table = pd.read_csv(_input(root, item), dtype=str, keep_default_na=False)
    texts = table["text0"].tolist()
    log(f"{item.name}: {len(texts)} texts, one contextual-substitution view from each of {', '.join(SCCL_VIEW_MODELS)}")
    views, _ = contextual_copies(texts, SCCL_VIEW_MODELS, copies=1, seed=0, progress=True,
                                 **{**CONTEXTUAL, "share": SCCL_VIEW_SHARE})
    out = pd.DataFrame({"label": table["label"], "text": texts, "text1": [v[0] for v in views],
                        "text2": [v[1] for v in views]})
    out.to_csv(root / item.path, index=False)


def unpack(archive: Path, item: Item, root: Path, log: Callable[[str], None]) -> None:
    """The tar's folder that holds ``STS/`` becomes ``item.path``; the archive is deleted afterwards."""
    out = root / item.path
    with tempfile.TemporaryDirectory(dir=archive.parent) as tmp, tarfile.open(archive) as tar:
        tar.extractall(tmp, filter="data")
        top = next((p.parent for p in sorted(Path(tmp).rglob("STS")) if p.is_dir()), None)
        if top is None:
            raise ConfigError(f"'{archive}' holds no STS folder; it is not SentEval's data. Delete it and run the "
                              "command again.")
        out.parent.mkdir(parents=True, exist_ok=True)
        top.replace(out)
    archive.unlink()
    log(f"unpacked {archive.name} into {out}")


BUILDERS = {"wiki_sample": wiki_sample, "nli_pairs": nli_pairs, "nli_sample": nli_sample,
            "googlenews_ts": googlenews_ts, "sccl_views": sccl_views}
