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
# With the AECL authors' files in .gpu/aecl_stc (prepare_gpu_folder.py --aecl-snapshot <AECL-STC snapshot>; carry
# .gpu/aecl_stc too), the same call also runs issue 32's side by side with their code on the card, seeds 0-2
# (scripts/aecl_side_by_side.py --device cuda --swap: both codes' full runs, and both codes' stage 3 from our
# end-of-stage-2 checkpoint), beside the six runs above; back come aecl_side_by_side.tgz (no checkpoints) and
# aecl_side_by_side.txt (its tables). Every job is stopped after RUN_SECONDS (default 480) so the results come back
# inside the device call's limit.
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

limit="${RUN_SECONDS:-480}"
start=$SECONDS
sbs=/tmp/aecl_side_by_side
if [ -f .gpu/aecl_stc/train.py ]; then
  rm -rf "$sbs" && mkdir -p "$sbs"
  if [ ${#scale[@]} -eq 0 ]; then
    sbs_seeds="${SBS_SEEDS:-0 1 2}"; sbs_args=(--device cuda); sbs_data="$data"; sbs_env=(env)
  else  # two batches an epoch on 320 texts, one seed: the script's paths, not its numbers; MiniLM's weights are
    # not in .gpu/site here (restored on the GPU machine only), so these jobs use this machine's packages
    sbs_seeds="0"; sbs_args=(--device cpu --batches 2); sbs_data=/tmp/aecl_side_by_side_data; sbs_env=(env PYTHONPATH=)
    mkdir -p "$sbs_data" && head -n 321 "$data/searchsnippets.csv" > "$sbs_data/searchsnippets.csv"
  fi
  for seed in $sbs_seeds; do
    "${sbs_env[@]}" OMP_NUM_THREADS=1 timeout "$limit" "$python" scripts/aecl_side_by_side.py --only ours --swap --snapshot .gpu/aecl_stc \
      --data "$sbs_data" --seeds "$seed" --out "$sbs" "${sbs_args[@]}" threads_per_job=1 > "$sbs.ours_s$seed.log" 2>&1 &
    "${sbs_env[@]}" OMP_NUM_THREADS=1 timeout "$limit" "$python" scripts/aecl_side_by_side.py --only authors --snapshot .gpu/aecl_stc \
      --data "$sbs_data" --seeds "$seed" --out "$sbs" "${sbs_args[@]}" > "$sbs.authors_s$seed.log" 2>&1 &
  done
fi
for seed in $seeds; do
  timeout "$limit" "$python" scripts/fidelity_runs.py "${scale[@]}" --groups aecl_forms --only method.reference=true --seeds "$seed" \
    --part "s$seed" --out "$runs" --keep-going --extra "${extra[@]}" "data_dir=$data" > "$runs.aecl_s$seed.log" 2>&1 &
  timeout "$limit" "$python" scripts/fidelity_runs.py "${scale[@]}" --groups sccl_at_aecl_budget --seeds "$seed" \
    --part "s$seed" --out "$runs" --keep-going --extra "${extra[@]}" "data_dir=$data" > "$runs.sccl_s$seed.log" 2>&1 &
done
wait
# timeout stops the drivers; the runs they started would go on: stop them too (a run saves its checkpoint on TERM)
pkill -TERM -f "run.py experiment=aecl_searchsnippets|authors_aecl.py|run.py -m" && sleep 10
echo "gpu_aecl_vs_sccl: the runs took $((SECONDS - start)) s"
mkdir -p "$runs/driver_logs" && mv "$runs".*.log "$runs/driver_logs/"
grep -h "== .*exit" "$runs"/driver_logs/*.log

"$python" scripts/fidelity_report.py "$runs" > "$out/summary.txt" 2>&1
tail -40 "$out/summary.txt"
tar czf "$out/fidelity.tgz" --exclude='*.ckpt' -C "$runs" .

if [ -d "$sbs" ]; then
  mv "$sbs".*.log "$sbs/" 2>/dev/null
  seeds_csv=$(echo $sbs_seeds | tr ' ' ',')
  "${sbs_env[@]}" "$python" scripts/aecl_side_by_side.py --table-only --swap --seeds "$seeds_csv" --out "$sbs" --data "$sbs_data" \
    "${sbs_args[@]}" > "$out/aecl_side_by_side.txt" 2>&1
  cat "$out/aecl_side_by_side.txt"
  tail -n 3 "$sbs"/*.log
  tar czf "$out/aecl_side_by_side.tgz" --exclude='*.ckpt' -C "$sbs" .
fi
ls -la "$out"
