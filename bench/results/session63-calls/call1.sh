#!/usr/bin/env bash
# Session 63's first device call: issue 17's end-to-end decode against transformers with its
# fast Mamba-2 kernels installed (mamba-ssm 2.3.2.post1's Triton modules, causal-conv1d
# 1.7.0's extension built here for sm_90 against the device's torch), which no call had run:
# the README's table was against its torch fallback. The 100M checkpoint on both of
# transformers' paths (and whether they draw the same tokens), the 0.56B on the fast path, ours
# beside each in the same call (bench/device_calls.sh's transformers_e2e). On an H200, then
# the 0.56B's batch-1 step (three rounds) and decode attention against FlashInfer 0.2.5 (issue
# 17's two goals unmeasured on one since session 51 / 38).
# Pack: `rm -rf .carry && PACK_XZ=1 scripts/pack-device.sh mstar-bench-model-gpu mstar-gpu-bench
# && cp bench/device_calls.sh bench/results/session63-calls/{common.sh,call1.sh} .carry/ &&
# mkdir -p .carry/base .carry/fi && cp .whl-baselines/{mamba_ssm,causal_conv1d}-*.tar.gz
# .whl-baselines/causal-conv1d-*-ext-*.tar.xz .carry/base/ && cp .whl-baselines/flashinfer_python-0.2.5.tar.gz
# .whl-baselines/flashinfer-*-ops-*.tar.xz .carry/fi/`; run `CALL_LIMIT=560 bash .carry/call1.sh`
# carrying `.carry`.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/common.sh"
card=$(nvidia-smi --query-gpu=name --format=csv,noheader)
echo "$card" | tee "$w/card.txt"
python3 -c 'import torch, transformers, triton; print("torch", torch.__version__, "transformers",
  transformers.__version__, "triton", triton.__version__)' | tee -a "$w/card.txt"
echo "== 100M: ours, transformers fast path, transformers torch fallback"
FALLBACK=1 transformers_e2e nh100 nemotron_h-100m "$here/base"
echo "== 0.56B: ours, transformers fast path"
(($(left) > 120)) && transformers_e2e nh056 nemotron_h-0.56b "$here/base"
if [[ $card == *H200* ]]; then
  echo "== H200: the 0.56B at batch 1, then decode attention against FlashInfer"
  checkpoint nh056 nemotron_h-0.56b
  nh056_rounds 3 "defaults" "1"
  (($(left) > 90)) && attn_rows_against_flashinfer "$here/fi"
fi
finish call1
