#!/usr/bin/env bash
# Session 52's third call: the kernels as they stay. The rows_mma walk's split aims at one wave
# (decode_rows_mma_split_waves: 4 chunks at 64 rows rather than 8; call2, H100: 201.9 against
# 206.1 us), the page ids read at the refill again (reading them ahead changed nothing), and
# the fused merge the default at one row of the mma walk too (call2: the 0.56B at batch 1
# 478.1-478.7 us against 480.3-481.1). Tests of what changed, then the 0.56B at batch 1 on the
# defaults against the block merge at one row (MSTAR_ATTN_SPLIT_MERGE=1, the old default)
# and MSTAR_PLAN_INLINE=1, two rounds alternated, the defaults' step timeline, and decode
# attention at 1 / 4 / 16 / 64 / 256 rows of 2,048 positions on the defaults and with 8 chunks
# a row (MSTAR_ATTN_SPLITS=8, the old split at 64 rows) against FlashInfer 0.2.5's decode.
# Last, Nsight Compute over the split launches at 64 and 4 rows. Pack as call2;
# `CALL_LIMIT=420 bash .carry/call3.sh`.
set -uo pipefail
source "$(dirname "$0")/common.sh"
nvidia-smi --query-gpu=name --format=csv,noheader
# (No GPU tests: the carry had to shrink under the device's 64 MiB; call2 ran the kernels' tests and
# gpu_attention_fused_merge_host, host only, passed here.)
checkpoint nh056 nemotron_h-0.56b
nh056_rounds 2 "defaults block1 planinline" 1
shapes=(--rows 1 4 16 64 256 --prefill-rows 1 --rounds 5)
attn() {  # TAG [ENV...]
  local tag=$1
  shift
  (($(left) > 90)) || return 0
  env "$@" timeout 60 "$bin/mstar-gpu-bench" --suite attention "${shapes[@]}" --graphs --json \
    2>"$w/attn-$tag.err" | grep '^{' | sed "s/^{/{\"setting\":\"$tag\",/" >>"$w/attn.jsonl"
  echo "attn $tag done ($((SECONDS - t0)) s)"
}
attn defaults MSTAR_NONE=0
attn s8 MSTAR_ATTN_SPLITS=8
attn defaults2 MSTAR_NONE=0
if (($(left) > 80)); then
  whl=$root/.whl-baselines
  src=/tmp/baselines-src
  mkdir -p "$src" /tmp/flashinfer-prebuilt
  tar xzf "$whl"/flashinfer_python-0.2.5.tar.gz -C "$src"
  fi_args=(--flashinfer-src "$src/flashinfer_python-0.2.5" --flashinfer-cache /tmp/flashinfer_build)
  for a in "$whl"/flashinfer-*-ops-*.tar.xz; do
    [[ -f $a ]] || continue
    tar xJf "$a" -C /tmp/flashinfer-prebuilt
    fi_args+=(--flashinfer-prebuilt /tmp/flashinfer-prebuilt/ops)
  done
  timeout 70 python3 bench/baselines_h200.py --json --parts flashinfer "${shapes[@]}" \
    --modes graph "${fi_args[@]}" >"$w/fi.jsonl" 2>"$w/fi.err"
  echo "flashinfer exit $? ($((SECONDS - t0)) s)"
fi
python3 bench/results/session52-calls/attn_table.py "$w/attn.jsonl" "$w/fi.jsonl" | tee "$w/attn-table.txt"
(($(left) > 40)) && timeline_of defaults
# Nsight Compute over the split launches call2's pass missed (it caught the one-pass case the
# bench times first): rows_mma at 64 rows (launches past the one-pass case's ~12) and the mma
# walk at 4 rows (past its ~104), two each, without graphs.
ncu_split() {  # NAME REGEX SKIP ROWS
  (($(left) > 35)) || return 0
  local ncu
  ncu=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
  timeout $(($(left) - 10)) "$ncu" --set full -k "regex:$2" -s "$3" -c 2 -f -o "$w/$1" \
    "$bin/mstar-gpu-bench" --rounds 1 --suite attention --rows "$4" --prefill-rows 1 >"$w/$1.log" 2>&1
  echo "ncu $1 exit $?"
  "$ncu" --import "$w/$1.ncu-rep" --page details >"$w/$1.txt" 2>&1
  rm -f "$w/$1.ncu-rep"
  grep -E '^  [a-zA-Z_].*\(|Duration|DRAM Throughput|Grid Size|Achieved Occupancy|Warp Cycles Per Issued|Issued Ipc' \
    "$w/$1.txt" | head -20
}
ncu_split ncu-rows64-split rows_mma 20 64
ncu_split ncu-mma4-split 'attend_decode_mma' 120 4
finish call3
