#!/usr/bin/env bash
# Session 58's fifth device call: the GPU tests through which the default walk's change (steps
# of 16 rows and more on the mma walk) reaches models: the model and Qwen3.5 tests, the
# parity fixtures, the default-rule attention tests, the pool walk.
# Pack: as call3 without the FlashInfer folder; run `CALL_LIMIT=230 bash .carry/call5.sh`.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/common.sh"
nvidia-smi --query-gpu=name --format=csv,noheader
gpu_tests 'tiny/*:qwen3_5/*:gpu_attention.*:gpu_pool_walk.*:gpu_model*:gpu_qwen3_5*' $(($(left) - 10))
finish call5
