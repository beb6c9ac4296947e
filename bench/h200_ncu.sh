#!/usr/bin/env bash
# Nsight Compute over the kernels furthest from issue 17's goals, on an H200
# (the device machine), results under $OUT: for each case one launch of each
# named kernel under `ncu --set full` (<case>.ncu-rep, to open in the Nsight
# Compute UI) and its text pages (<case>.txt: speed of light, memory and
# compute workload, occupancy, warp stall reasons, source counters), the
# headline lines printed. Each case is bounded (SECONDS_EACH, default 90).
#   prefill-wgmma   the warpgroup-MMA causal prefill attention, 8 x 2,048 tokens
#   decode-rows16   the tensor-core whole-row decode walk at 16 rows of 2,048
#   decode-rows64   the same walk at 64 rows of 2,048 (0.90 of FlashInfer there)
#   decode-mma4     the tensor-core split walk at 4 rows of 2,048 and its merge (0.88)
#   decode-regs1    the register walk at one row of 2,048 (split) and its merge
#   ssd-chunks      the chunked SSD scan's kernels at one row of 2,048 (h64, h128)
#   gemv            the one-row GEMVs of the 0.56B's batch-1 step (plain and folded)
#   ssd-update      the SSD update (gated-norm fold) of the 0.56B's batch-1 step, alone
#                   (ncu serializes the graph's nodes: its own time, not its chained one)
#   bash bench/h200_ncu.sh [CASE...]   (default: all)
# Needs scripts/pack-device.sh mstar-gpu-bench mstar-bench-model-gpu (.carry).
set -uo pipefail
source "$(dirname "$0")/device_env.sh"
ncu=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
[[ -x $ncu ]] || { echo "h200_ncu.sh: no ncu ($ncu)" >&2; exit 2; }
each=${SECONDS_EACH:-90}
cases=("$@")
((${#cases[@]})) || cases=(prefill-wgmma decode-rows16 decode-regs1 ssd-chunks gemv)
ckpt=""
profile() {  # NAME KERNEL_REGEX LAUNCHES COMMAND...
  local name=$1 regex=$2 count=$3
  shift 3
  timeout "$each" "$ncu" --set full --import-source yes -k "regex:$regex" -c "$count" \
    -f -o "$out/$name" "$@" >"$out/$name.log" 2>&1
  echo "== $name: exit $? ($(grep -c '==PROF== Profiling' "$out/$name.log") launches profiled)"
  "$ncu" --import "$out/$name.ncu-rep" --page details >"$out/$name.txt" 2>&1
  grep -E '^  [a-zA-Z_].*\(|Duration|Memory Throughput|Compute \(SM\) Throughput|Achieved Occupancy|Registers Per Thread|Block Limit' \
    "$out/$name.txt" | head -40
}
gpu_bench() { echo "$bin/mstar-gpu-bench" --rounds 1 "$@"; }
# Launches SKIP.. SKIP+COUNT-1 of the kernels matching REGEX in the 0.56B's batch-1 decode
# (NEW_TOKENS steps; the graphs' nodes one at a time, so each kernel's own time).
step_profile() {  # NAME REGEX SKIP COUNT NEW_TOKENS
  local name=$1
  if [[ -z $ckpt ]]; then
    ckpt=$(mktemp -d)/nh056
    python3 "$root/bench/make_checkpoint.py" --size nemotron_h-0.56b --out "$ckpt" >"$out/ckpt.log" 2>&1
  fi
  timeout "$each" "$ncu" --set full --import-source yes -k "regex:$2" -s "$3" -c "$4" \
    --graph-profiling node -f -o "$out/$name" "$bin/mstar-bench-model-gpu" --model "$ckpt" \
    --batch 1 --prompt-len 32 --new-tokens "$5" --repeats 1 --json >"$out/$name.log" 2>&1
  echo "== $name: exit $?"
  "$ncu" --import "$out/$name.ncu-rep" --page details >"$out/$name.txt" 2>&1
  grep -E '^  [a-zA-Z_].*\(|Duration|Memory Throughput|DRAM Throughput|Achieved Occupancy|Stall' \
    "$out/$name.txt" | head -40
}
for c in "${cases[@]}"; do
  case $c in
    prefill-wgmma)
      profile prefill-wgmma 'attend_prefill_wgmma' 1 $(gpu_bench --suite attention --rows 1 --prefill-rows 8) ;;
    decode-rows16)
      MSTAR_ATTN_DECODE_WALK=5 profile decode-rows16 'rows_mma' 2 $(gpu_bench --suite attention --rows 16 --prefill-rows 1) ;;
    decode-rows64)
      MSTAR_ATTN_DECODE_WALK=5 profile decode-rows64 'rows_mma' 2 $(gpu_bench --suite attention --rows 64 --prefill-rows 1) ;;
    decode-mma4)
      profile decode-mma4 'decode|merge' 3 $(gpu_bench --suite attention --rows 4 --prefill-rows 1) ;;
    decode-regs1)
      profile decode-regs1 'decode|merge' 3 $(gpu_bench --suite attention --rows 1 --prefill-rows 1) ;;
    ssd-chunks)
      profile ssd-chunks 'chunk_output_staged|chunk_cb_sliced|state_walk|chunk_table' 8 \
        $(gpu_bench --suite ssd --prefill-rows 1) ;;
    gemv)
      # Past the prompt's step and the graphs' capture: launches 200-209 are decode steps' GEMVs.
      step_profile gemv 'gemv' 200 10 64 ;;
    ssd-update)
      # Past the prompt's step and the graphs' capture: decode steps' updates (eight a step).
      step_profile ssd-update 'ssd_update_rows' 40 4 32 ;;
    *) echo "h200_ncu.sh: unknown case '$c'" >&2; exit 2 ;;
  esac
done
