#!/usr/bin/env bash
# Everything issue 28 measures on a lent GPU, as one device command of about 6 minutes (docs/gpu.md, "One GPU
# session"): the authors' SCCL loop (fp32), the project end to end (Trainer.fit, bf16 and fp32) beside its raw
# step, the raw rows of SCCL, AECL and PairSupCon (bf16/fp32, chunked or not, cached gradients), start-up before
# the first step, and the host syncs of a few steps counted by CUDA. Prints one Markdown block for BENCHMARKS.md;
# files go to $OUT (the device tool returns them) or /tmp/gpu_session.
#
# On the CPU machine first: make install, then .venv/bin/python scripts/prepare_gpu_folder.py (makes .gpu/)
# On the GPU machine:       bash scripts/gpu_session.sh
# A check at tiny scale on a CPU (no authors' loop unless .gpu/official exists): bash scripts/gpu_session.sh --tiny
set -uo pipefail
cd "$(dirname "$0")/.."
out="${OUT:-/tmp/gpu_session}"
mkdir -p "$out"
if [ "${1:-}" = "--tiny" ]; then
  python="${PYTHON:-.venv/bin/python}"
  scale=(--device cpu --tiny)
  e2e_steps="2,5"; steps=2; raw_methods="sccl"; precisions="fp32,bf16"; authors_steps=(2 4 cpu); authors_batch=8
else
  python="${PYTHON:-python3}"
  scale=()
  e2e_steps="20,170"; steps=10; raw_methods="sccl,aecl,pairsupcon"; precisions="fp32,bf16"; authors_steps=(20 170)
  authors_batch=400
fi
[ -d .gpu/site ] && export PYTHONPATH="$PWD/.gpu/site${PYTHONPATH:+:$PYTHONPATH}"
export PROJECT_ROOT="$PWD" TOKENIZERS_PARALLELISM=false PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1
data="${DATA:-$PWD/.gpu/data}"  # a folder with stackoverflow.csv (and wiki_sample.txt)
[ -f "$data/stackoverflow.csv" ] || data="${PROJECT_DATA_DIR:-$PWD/data}/short_text"  # the project's data folder
log="$out/gpu_session.log"
: > "$log"
say() { echo "gpu_session: $*" | tee -a "$log"; }

say "$(date -u +%FT%TZ) $("$python" -c 'import torch; print(torch.__version__, torch.version.cuda, torch.cuda.get_device_name(0) if torch.cuda.is_available() else "CPU")')"

# 1. the authors' loop, fp32, same random-init DistilBERT-base and data (needs .gpu/official from prepare.sh)
if [ -f .gpu/authors_sccl.py ] && [ -d .gpu/official/sccl ]; then
  bb=$("$python" -c "import sys; sys.path.insert(0, '.'); from pathlib import Path; from scripts.bench_gpu import \
backbone_folder; print(backbone_folder('distilbert-base', '${1:-}' == '--tiny', Path('/tmp/bb')))")
  BATCH=$authors_batch timeout 150 "$python" .gpu/authors_sccl.py "$bb" "$data" "${authors_steps[@]}" 2>&1 \
    | grep "authors_sccl:" | tee -a "$log"
else
  say "authors' loop skipped: .gpu/official/sccl (the authors' files) and .gpu/authors_sccl.py are not there"
fi

# 2. the project end to end (bf16, fp32) beside its raw step, and the raw rows; start-up is in the end-to-end rows
timeout 330 "$python" scripts/bench_gpu.py "${scale[@]}" --out "$out/bench_gpu.md" --methods "$raw_methods" --precisions "$precisions" \
  --steps "$steps" --warmup 2 --chunk-tokens 0,8192 --grad-cache 0,2048 --end-to-end --e2e-methods sccl \
  --e2e-steps "$e2e_steps" --e2e-chunk 8192 --e2e-variants encoder_chunk_tokens=0 --data-dir "$data" 2>>"$log" | tee -a "$log" >/dev/null

# 3. host syncs in a few SCCL steps, counted by CUDA itself (none on a CPU)
timeout 60 "$python" scripts/bench_gpu.py --count-syncs "${scale[@]}" --data-dir "$data" 2>>"$log" \
  | tee -a "$log" | grep "count-syncs"

echo
echo "<!-- paste into BENCHMARKS.md, GPU section -->"
grep "authors_sccl:.*steps/s" "$log" | sed 's/^/    /'
sed -n '/bench-gpu:start/,/bench-gpu:end/p' "$out/bench_gpu.md"
grep "count-syncs" "$log" | sed 's/^/    /'
