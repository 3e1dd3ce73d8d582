#!/usr/bin/env bash
# Issue 32's AECL-vs-SCCL rows on a lent GPU as one device command (docs/gpu.md, "Quality runs on a GPU"): AECL with
# reference=true and SCCL at the same budget (scripts/fidelity_runs.py groups aecl_forms and sccl_at_aecl_budget,
# 1000 steps at batch 64 on SearchSnippets, minilm), seeds 1-3, the six runs side by side on the one card
# (trainer=gpu_fp32). On an H100 in issue 13 an AECL run trained in ~250-270 s beside five other jobs.
#
# On the CPU machine first: make install, then
#   .venv/bin/python scripts/prepare_gpu_folder.py --minilm-fp16   (.gpu/; MiniLM in float16 to fit the 64 MiB carried)
# On the GPU machine (carry .gpu/site, .gpu/data/searchsnippets.csv, .gpu/minilm_fp16.safetensors):
#   bash scripts/gpu_aecl_vs_sccl.sh
# A check at tiny scale on a CPU (tiny backbone, a few steps, one seed):  bash scripts/gpu_aecl_vs_sccl.sh --smoke
#
# Back in $OUT: fidelity.tgz (each run's results.json, metrics, command and log; no checkpoints) and summary.txt
# (scripts/fidelity_report.py on the runs). Here: mkdir -p logs/fidelity_gpu && tar xzf <files_at>/fidelity.tgz -C
# logs/fidelity_gpu, then the commands of RESULTS.md's issue-13 section.
set -uo pipefail
cd "$(dirname "$0")/.."
out="${OUT:-/tmp/gpu_aecl_vs_sccl}"
mkdir -p "$out"
runs=/tmp/gpu_aecl_vs_sccl_runs
rm -rf "$runs"
if [ "${1:-}" = "--smoke" ]; then
  python="${PYTHON:-.venv/bin/python}"
  seeds="1"; scale=(--smoke); extra=(threads_per_job=1)
else
  python="${PYTHON:-python3}"
  seeds="${SEEDS:-1 2 3}"; scale=(); extra=(trainer=gpu_fp32 threads_per_job=2)
fi
[ -d .gpu/site ] && export PYTHONPATH="$PWD/.gpu/site${PYTHONPATH:+:$PYTHONPATH}"
export PROJECT_ROOT="$PWD" TOKENIZERS_PARALLELISM=false PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1
data="${DATA:-$PWD/.gpu/data}"  # a folder with searchsnippets.csv
[ -f "$data/searchsnippets.csv" ] || data="${PROJECT_DATA_DIR:-$PWD/data}/short_text"
echo "gpu_aecl_vs_sccl: $(date -u +%FT%TZ) $("$python" -c 'import torch; print(torch.__version__, torch.cuda.get_device_name(0) if torch.cuda.is_available() else "CPU")'), data $data"

if [ ${#scale[@]} -eq 0 ]; then
  "$python" scripts/minilm_for_device.py restore || exit 1
fi

start=$SECONDS
for seed in $seeds; do
  "$python" scripts/fidelity_runs.py "${scale[@]}" --groups aecl_forms --only method.reference=true --seeds "$seed" \
    --part "s$seed" --out "$runs" --keep-going --extra "${extra[@]}" "data_dir=$data" > "$runs.aecl_s$seed.log" 2>&1 &
  "$python" scripts/fidelity_runs.py "${scale[@]}" --groups sccl_at_aecl_budget --seeds "$seed" \
    --part "s$seed" --out "$runs" --keep-going --extra "${extra[@]}" "data_dir=$data" > "$runs.sccl_s$seed.log" 2>&1 &
done
wait
echo "gpu_aecl_vs_sccl: the runs took $((SECONDS - start)) s"
mkdir -p "$runs/driver_logs" && mv "$runs".*.log "$runs/driver_logs/"
grep -h "== .*exit" "$runs"/driver_logs/*.log

"$python" scripts/fidelity_report.py "$runs" > "$out/summary.txt" 2>&1
tail -40 "$out/summary.txt"
tar czf "$out/fidelity.tgz" --exclude='*.ckpt' -C "$runs" .
ls -la "$out"
