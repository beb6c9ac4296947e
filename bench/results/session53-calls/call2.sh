#!/usr/bin/env bash
# Session 53's second device call (for the next session with a GPU, after call1): decode
# attention at 1 / 4 / 16 / 64 / 256 rows of 2,048 positions on the defaults and with each of
# call1's switches (MSTAR_ATTN_ROWS_MMA_LAST_WARP=1, MSTAR_ATTN_MMA_COPIES_FIRST=1) against
# FlashInfer 0.2.5's decode in the same call (issue 17's table), then the 0.56B at batch 1 on
# the defaults and with copies first. No GPU tests (call1 runs them): the carry with
# .whl-baselines must stay under 64 MiB. Pack: `rm -rf .carry && PACK_XZ=1
# scripts/pack-device.sh mstar-gpu-bench mstar-bench-model-gpu && cp bench/device_calls.sh
# bench/results/session53-calls/{common.sh,call2.sh} .carry/ && rm -rf .carry/bin .carry/lib`;
# run `CALL_LIMIT=420 bash .carry/call2.sh` carrying `.carry` and `.whl-baselines` (made by
# `bash bench/baselines_wheels.sh` and `bash bench/flashinfer_prebuilt.sh --venv DIR`).
set -uo pipefail
source "$(dirname "$0")/common.sh"
nvidia-smi --query-gpu=name --format=csv,noheader
export ATTN_SHAPES="--rows 1 4 16 64 256 --prefill-rows 1 --rounds 5"
attn_setting defaults MSTAR_NONE=0
attn_setting lastwarp MSTAR_ATTN_ROWS_MMA_LAST_WARP=1
attn_setting copies MSTAR_ATTN_MMA_COPIES_FIRST=1
(($(left) > 120)) && attn_flashinfer
python3 bench/results/session52-calls/attn_table.py "$w/attn.jsonl" "$w/fi.jsonl" |
  tee "$w/attn-table.txt"
attn_setting defaults2 MSTAR_NONE=0
checkpoint nh056 nemotron_h-0.56b
nh056_rounds 2 "defaults copies1" 1
finish call2
