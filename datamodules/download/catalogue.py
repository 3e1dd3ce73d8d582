"""Every public file a paper row reads, where it comes from, and what is built from it.

The one list of the project's data files: ``python tools.py download`` fetches and builds from it,
``validation.check_corpus`` names the download of a missing corpus from it, and ``launching.reproduce``
lists each row's files with it. Paths are relative to the data folder (``data_root()``), which has the
layout the dataset configs read: ``short_text/``, ``wiki/``, ``nli/``, ``senteval/downstream/``.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# the variable the configs read (conf/config.yaml: data_dir, sts_data_dir; conf/dataset/wiki.yaml, nli.yaml)
DATA_ENV = "PROJECT_DATA_DIR"
COMMAND = "python tools.py download"

AECL_REPO = "https://raw.githubusercontent.com/YZH0905/AECL-STC/45f938637bb974b615fc46949fb26dada094d0ca"
SIMCSE_DATA = "https://huggingface.co/datasets/princeton-nlp/datasets-for-simcse/resolve/main"
SHORT_TEXT_SETS = ("agnews", "searchsnippets", "stackoverflow", "biomedical", "googlenews_ts", "googlenews_t",
                   "googlenews_s", "tweet")


def data_root() -> Path:
    """The data folder: ``$PROJECT_DATA_DIR``, else the repository's own ``data/`` (ignored by git)."""
    return Path(os.environ.get(DATA_ENV) or ROOT / "data")


@dataclass(frozen=True)
class Item:
    """One file (or, for an archive, one folder) that recipes read.

    ``url``: fetched from there; otherwise ``inputs`` (other items' names) are turned into it by ``build``
    (a function name of ``datamodules.download.build``). ``sha256`` where the upstream file is known
    byte for byte, else only the size the server announces is checked.
    """

    name: str
    path: str
    what: str
    url: str | None = None
    sha256: str | None = None
    archive: bool = False          # a tar file unpacked into ``path``
    inputs: tuple[str, ...] = ()
    build: str | None = None
    rows: int | None = None        # data rows (lines, pairs): the GPU-hour estimate of launching.reproduce
    slow: bool = False             # only when named: hours on a CPU (masked language models over every text)
    sample: bool = False           # a small stand-in for a corpus: results.json of a run on it says so
    groups: tuple[str, ...] = field(default_factory=tuple)

    def source(self) -> str:
        """Where it comes from, for messages: the URL, or the inputs' URLs and the build step."""
        if self.url:
            return self.url
        return f"built from {', '.join(self.inputs)} ({self.build})"


def _aecl(name: str, upstream: str, sha256: str | None, rows: int, what: str) -> Item:
    return Item(name=name, path=f"short_text/{name}.csv", url=f"{AECL_REPO}/prepare_data/augmented%20data/{upstream}",
                sha256=sha256, rows=rows, what=f"{what} (AECL authors' file {upstream}: label, text0, text1 = EDA)",
                groups=("short_text", "aecl", "sccl"))


# The sha256 of the AECL files are those of the copies in this project's test data, which are the same
# bytes as the repository's blobs at that commit (git blob ids compared); TS.csv was not among them.
ITEMS: tuple[Item, ...] = (
    _aecl("agnews", "agnews.csv", "63cf303f4295e0e7c4d606b6db3afcae5246c1f9fa7c2637d40e120b4e5e45eb", 8000,
          "AgNews"),
    _aecl("searchsnippets", "searchsnippets.csv",
          "88add9eac2aef6f961e3952ca63684143bb23b5fbf00158f2808165d6e3cb726", 12340, "SearchSnippets"),
    _aecl("stackoverflow", "stackoverflow.csv",
          "be18ea38dabfe3f90ad9dd831489335e34aeb51d2cdb42606d59931dbb043c1d", 20000, "StackOverflow"),
    _aecl("biomedical", "biomedical.csv", "94ba7684a51556d77df7896a6273465cf70f10e4eed0898c6f8745399c2efa1c", 20000,
          "Biomedical"),
    _aecl("googlenews_s", "S.csv", "60a488fd914648a792eda0d4e012a0e02d340ce14f0e42f4180ff046b749091c", 11108,
          "GoogleNews-S"),
    _aecl("googlenews_t", "T.csv", "a5d3a60bcbc4f81db8f6eef1db888f806d3c28c11347346b9be7b15071cb5833", 11108,
          "GoogleNews-T"),
    _aecl("tweet", "tweet.csv", "f766daef74b4846ad8a2c6342becf2f97bd1576a2bcdfa8ed4b07993871a2007", 2472, "Tweet"),
    Item(name="googlenews_ts_authors", path="short_text/googlenews_ts_authors.csv",
         url=f"{AECL_REPO}/prepare_data/augmented%20data/TS.csv", rows=11109,
         what="GoogleNews-TS as published by the AECL authors (TS.csv; size checked, its columns are checked when "
              "googlenews_ts.csv is built)", groups=("short_text", "aecl", "sccl")),
    Item(name="googlenews_ts", path="short_text/googlenews_ts.csv", inputs=("googlenews_ts_authors",),
         build="googlenews_ts", rows=11109,
         what="GoogleNews-TS as label, text0, text1: the authors' EDA column where TS.csv has one, else one made "
              "by `python tools.py augment --method eda`", groups=("short_text", "aecl", "sccl")),
    *(Item(name=f"{name}_views", path=f"short_text/{name}_trans_subst_20.csv", inputs=(name,), build="sccl_views",
           slow=True, groups=("sccl_views",),
           what=f"SCCL's two contextual-substitution views of {name} (`python tools.py augment --method contextual`, "
                "roberta-base and bert-base-uncased from the Hugging Face Hub)")
      for name in SHORT_TEXT_SETS),
    Item(name="wiki1m", path="wiki/wiki1m_for_simcse.txt", url=f"{SIMCSE_DATA}/wiki1m_for_simcse.txt", rows=1_000_000,
         what="SimCSE's one million Wikipedia sentences (princeton-nlp/SimCSE data/download_wiki.sh)",
         groups=("wiki",)),
    Item(name="wiki_sample", path="wiki/wiki_sample.txt", inputs=("wiki1m",), build="wiki_sample",
         rows=11914, sample=True,
         what="the first 11,914 lines of wiki1m_for_simcse.txt (dataset=wiki's sample)", groups=("wiki",)),
    Item(name="nli_for_simcse", path="nli/nli_for_simcse.csv", url=f"{SIMCSE_DATA}/nli_for_simcse.csv", rows=275_601,
         what="SimCSE's SNLI + MultiNLI triplets sent0, sent1, hard_neg (princeton-nlp/SimCSE data/download_nli.sh)",
         groups=("nli",)),
    Item(name="nli_pairs", path="nli/nli_pairs.csv", inputs=("nli_for_simcse",), build="nli_pairs", rows=551_202,
         what="PairSupCon's pairs: entailment and contradiction pair of each triplet "
              "(`python tools.py prepare nli-pairs`)", groups=("nli",)),
    Item(name="nli_sample", path="nli/nli_sample.csv", inputs=("nli_pairs",), build="nli_sample",
         rows=20000, sample=True,
         what="20,000 pairs of nli_pairs.csv drawn with seed 0 (dataset=nli's sample)", groups=("nli",)),
    Item(name="senteval", path="senteval/downstream", url=f"{SIMCSE_DATA}/senteval.tar", archive=True,
         what="SentEval's STS12-16, STS-B, SICK and transfer tasks, tokenised as SentEval does (the archive of "
              "princeton-nlp/SimCSE SentEval/data/downstream/download_dataset.sh)", groups=("senteval",)),
)
BY_NAME = {item.name: item for item in ITEMS}
GROUPS = sorted({group for item in ITEMS for group in item.groups})


def select(names: list[str] | tuple[str, ...]) -> list[Item]:
    """The items named (an item or a group), with the items they are built from first; none: all but the slow."""
    wanted: list[Item] = []
    for name in names or ["all"]:
        if name == "all":
            wanted += [item for item in ITEMS if not item.slow]
        elif name in BY_NAME:
            wanted.append(BY_NAME[name])
        elif name in GROUPS:
            wanted += [item for item in ITEMS if name in item.groups]
        else:
            from textcore.errors import ConfigError

            raise ConfigError(f"'{name}' is not a data file or group; known: {', '.join(['all', *GROUPS, *BY_NAME])} "
                              f"(`{COMMAND} --list` describes them).")
    ordered: list[Item] = []

    def add(item: Item) -> None:
        for parent in item.inputs:
            add(BY_NAME[parent])
        if item not in ordered:
            ordered.append(item)

    for item in wanted:
        add(item)
    return ordered


def for_file(path: str | Path) -> Item | None:
    """The item whose file (or folder) has ``path``'s name and parent folder's name (``.../wiki/<file>``)."""
    path = Path(path)
    for item in ITEMS:
        ours = Path(item.path)
        if ours.name == path.name and (ours.parent.name == path.parent.name or item.archive):
            return item
    return None


def origins(item: Item) -> list[str]:
    """The URLs ``item`` is fetched or built from."""
    if item.url:
        return [item.url]
    return [url for name in item.inputs for url in origins(BY_NAME[name])]


def download_command(item: Item, dest: Path | None = None) -> str:
    """The command that fetches (and builds) ``item``; ``--output`` only where it is not the default folder."""
    extra = f" --output {dest}" if dest is not None and Path(dest).resolve() != data_root().resolve() else ""
    return f"{COMMAND} {item.name}{extra}"


def dest_of(path: str | Path, item: Item) -> Path:
    """The data folder that holds ``path`` in the catalogue's layout (``path`` minus ``item.path``)."""
    path = Path(path)
    for _ in Path(item.path).parts:
        path = path.parent
    return path
