#!/usr/bin/env bash
# Session 61's third device call (the same warm H100, written there as /tmp/c3.sh): the decode
# attention's shorter split chunks at one row (MSTAR_ATTN_SPLIT_MIN_CHUNK 32 / 64; the fused
# merge is the mma walk's default) against the defaults' 128, the 0.56B at batch 1, three
# rounds alternated. Run `CALL_LIMIT=120 bash call3.sh` from the repository root with call1's
# `.carry`.
source .carry/common.sh
nvidia-smi --query-gpu=name --format=csv,noheader
checkpoint nh056 nemotron_h-0.56b
nh056_rounds 3 "defaults chunk32merge2 chunk64merge2" "1"
finish call3
