#!/usr/bin/env bash
# Record of what ran: the chain and --suite gemv-chain are at commit 8fade5b (removed after call2).
# Session 59's first device call: the persistent GEMV chain (kernels/cuda/gemv_chain.hpp).
# Its GPU tests first (bits against the entry-5 GEMV, three launches), bounded, then
# mstar-gpu-bench --suite gemv-chain at 2 and 4 layers (8 / 16 links of the 0.56B's batch-1
# products) on graphs against the same links as chained GEMVs, then the 0.56B at batch 1
# under the defaults (issue 17's batch-1 goal, for the card the call got).
# Pack: `rm -rf .carry && PACK_XZ=1 scripts/pack-device.sh mstar_gpu_tests mstar-gpu-bench
# mstar-bench-model-gpu && cp bench/device_calls.sh bench/results/session59-calls/{common.sh,call1.sh}
# .carry/ && rm -rf .carry/bin .carry/lib`; run `CALL_LIMIT=240 bash .carry/call1.sh` carrying
# `.carry`.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/common.sh"
nvidia-smi --query-gpu=name --format=csv,noheader
gpu_tests 'gpu_gemv_chain.*' 60
for layers in 2 4; do
  timeout 60 "$bin/mstar-gpu-bench" --suite gemv-chain --chain-layers $layers --graphs \
    --rounds 5 --json >"$w/chain$layers.jsonl" 2>"$w/chain$layers.err"
  echo "chain $layers exit $?"
  gemv_lines "$w/chain$layers.jsonl" "L$layers"
done
checkpoint nh056 nemotron_h-0.56b
nh056_rounds 2 "defaults" "1"
finish call1
