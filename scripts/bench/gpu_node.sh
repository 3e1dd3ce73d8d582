#!/usr/bin/env bash
# The GPU measurements on a node without internet (docs/gpu.md, "A GPU node without internet"), from the checkout
# with the bundle that scripts/bench/gpu_bundle.py made on a machine with internet (.gpu/, or BUNDLE=<folder>):
#
#   bash scripts/bench/gpu_node.sh          # on the GPU node: paper-scale rows, about 6 minutes on an H100
#   bash scripts/bench/gpu_node.sh --tiny   # the same code at tiny scale on a CPU (a bundle made with --tiny does)
#   bash scripts/bench/gpu_node.sh --session [PARTS]          # the prepared session (scripts/bench/gpu_session.py):
#   bash scripts/bench/gpu_node.sh --tiny --session [PARTS]   #   quality,precision,profile,packing,steps,corpus; BUDGET (540 s)
#
# It times SCCL, AECL and PairSupCon steps at the papers' batch sizes (scripts/bench/gpu.py: fp32 and bf16, one
# padded call or chunks of 8192 tokens, with and without cached gradients), SCCL end to end (Trainer.fit on the
# real DataModule, evaluation off) beside its raw step, start-up before the first step, and counts the host syncs
# CUDA sees in a few SCCL steps. Files go to OUT (default logs/gpu_node/<time>); bench_gpu.md there is the section
# of BENCHMARKS.md that `python scripts/bench/report.py --section <OUT>/bench_gpu.md` puts in place.
#
# The Python: PYTHON=<interpreter>; else the bundle's venv, made from its wheels/ on first use (no network);
# else .venv/bin/python (with --tiny) or python3.
set -uo pipefail
cd "$(dirname "$0")/../.."
bundle="${BUNDLE:-.gpu}"
tiny=false
session=""
while [ $# -gt 0 ]; do
  case "$1" in
    --tiny) tiny=true ;;
    --session) session="quality,precision,profile,packing,steps,corpus"
      if [ -n "${2:-}" ] && [ "${2#--}" = "$2" ]; then session="$2"; shift; fi ;;
    *) echo "gpu_node: unknown argument $1 (--tiny, --session [PARTS])" >&2; exit 2 ;;
  esac
  shift
done
if [ ! -f "$bundle/bundle.json" ]; then
  echo "gpu_node: $bundle/bundle.json is not there: make the bundle first, on a machine with internet:" \
    "python scripts/bench/gpu_bundle.py$([ $tiny = true ] && echo ' --tiny')" >&2
  exit 2
fi
bundle="$(cd "$bundle" && pwd)"
if [ -n "${PYTHON:-}" ]; then
  python="$PYTHON"
elif [ -d "$bundle/wheels" ]; then
  if [ ! -x "$bundle/venv/bin/python" ]; then
    python3 -m venv "$bundle/venv" \
      && "$bundle/venv/bin/pip" install --no-index --find-links "$bundle/wheels" -r requirements.txt || exit 1
  fi
  python="$bundle/venv/bin/python"
elif [ $tiny = true ] && [ -x .venv/bin/python ]; then
  python=.venv/bin/python
else
  python=python3
fi
export PYTHONPATH="$bundle/site${PYTHONPATH:+:$PYTHONPATH}"
export PROJECT_ROOT="$PWD" TOKENIZERS_PARALLELISM=false PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
data="$bundle/data"
out="${OUT:-logs/gpu_node/$(date +%Y-%m-%d_%H-%M-%S)}"
mkdir -p "$out"
log="$out/gpu_node.log"
: > "$log"
say() { echo "gpu_node: $*" | tee -a "$log"; }

"$python" - <<'EOF' || exit 2
import importlib.util
import sys

need = ("torch", "lightning", "transformers", "sklearn", "pandas", "torchmetrics", "hydra", "omegaconf",
        "umap", "numba")
missing = [name for name in need if importlib.util.find_spec(name) is None]
if missing:
    sys.exit(f"gpu_node: {sys.executable} lacks {', '.join(missing)}: give the node a venv with requirements.txt, or "
             "make the bundle with --wheels (python scripts/bench/gpu_bundle.py --wheels)")
EOF

# a bundle made with --small carries MiniLM's weights in float16: float32 again before anything loads them
"$python" scripts/bench/gpu_bundle.py --widen "$bundle" >>"$log" 2>&1 || { say "could not widen the weights"; exit 1; }

if [ -n "$session" ]; then
  # the prepared session (docs/gpu.md, "The prepared session"): the parts within BUDGET seconds; the files to copy
  # back in $out
  "$python" scripts/bench/gpu_session.py --parts "$session" --budget-s "${BUDGET:-540}" --bundle "$bundle" \
    --data-dir "$data" --work "${WORK:-logs/gpu_session}" --collect "$out" $([ $tiny = true ] && echo --tiny) \
    2>>"$log"
  exit $?
fi

if [ $tiny = true ]; then
  scale=(--device cpu --tiny); e2e_steps="2,5"; steps=2; methods="sccl"
else
  scale=(); e2e_steps="20,170"; steps=10; methods="sccl,aecl,pairsupcon"
fi
say "$(date -u +%FT%TZ) $("$python" -c 'import torch; print("torch", torch.__version__, "CUDA", torch.version.cuda, torch.cuda.get_device_name(0) if torch.cuda.is_available() else "no GPU")')"

# 1. raw steps of each method and precision, and SCCL end to end beside its raw step (start-up included)
"$python" scripts/bench/gpu.py "${scale[@]}" --out "$out/bench_gpu.md" --methods "$methods" --precisions fp32,bf16 \
  --steps "$steps" --warmup 2 --chunk-tokens 0,8192 --grad-cache 0,2048 --end-to-end --e2e-methods sccl \
  --e2e-steps "$e2e_steps" --e2e-chunk 8192 --e2e-variants encoder_chunk_tokens=0 --data-dir "$data" \
  2>>"$log" >/dev/null || { say "scripts/bench/gpu.py failed; the end of $log:"; tail -n 20 "$log"; exit 1; }

# 2. host syncs in a few SCCL steps, counted by CUDA itself (none on a CPU)
"$python" scripts/bench/gpu.py --count-syncs "${scale[@]}" --data-dir "$data" 2>>"$log" | tee -a "$log" \
  | grep "count-syncs"

say "done: $out/bench_gpu.md"
cat "$out/bench_gpu.md"
