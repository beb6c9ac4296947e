#!/usr/bin/env bash
# Session 45's third call: which chained kernel draws the differing tokens (call1: every
# setting differs run to run except MSTAR_PDL=0)? The 0.56B at batch 16 (call1's runs differed
# there almost always), three runs a setting: first the diagnosis build whose __ldg loads are
# plain ones (.carry/plain/, -DMSTAR_PLAIN_LOADS, packed in bins.tar.xz), then the shipped binary with one family of
# kernels launched plain at a time (MSTAR_PDL_PLAIN, pieces of their mangled names).
# Results in $OUT/call3.tgz.
set -uo pipefail
source "$(dirname "$0")/common.sh"
python3 bench/make_checkpoint.py --size nemotron_h-0.56b --out "$ck/nh056" >/dev/null 2>&1
echo "== checkpoint ($((SECONDS - t0)) s)"

runs() {  # NAME BINARY COUNT [ENV...]
  local name=$1 binary=$2 n=$3 i f
  shift 3
  for i in $(seq 1 "$n"); do
    (($(left) > 20)) || return 0
    f=$w/$name-$i
    env "$@" timeout 60 "$binary" --model "$ck/nh056" --batch 16 --prompt-len 32 \
      --new-tokens 128 --repeats 2 --roofline-rounds 0 --json --tokens-out "$f.tokens.jsonl" \
      >"$f.jsonl" 2>"$f.err"
    echo "$name $i: exit $? $(python3 -c 'import json,sys
for l in open(sys.argv[1]): j=json.loads(l); print(" ".join(d[:8] for d in j["tokens_digests"]), "%.1f us" % (1e3*j["step_ms"]))' "$f.jsonl" 2>/dev/null)"
  done
}
if [[ -x .carry/plain/mstar-bench-model-gpu ]]; then  # packed beside bin/ in bins.tar.xz
  runs plainloads .carry/plain/mstar-bench-model-gpu 4
fi
runs defaults "$bin/mstar-bench-model-gpu" 2
for fam in gemv_bf16_kernel conv_step ssd_update attend merge_splits rms_norm append_kernel \
  sample_kernel,argmax_kernel,loopback_kernel activate,embedding,rope,to_bf16 _; do
  runs "plain-$fam" "$bin/mstar-bench-model-gpu" 3 "MSTAR_PDL_PLAIN=$fam"
done
echo "== tokens by setting ($((SECONDS - t0)) s)"
for f in "$w"/*-1.tokens.jsonl; do
  name=$(basename "$f" -1.tokens.jsonl)
  echo "$name: $(python3 bench/token_runs.py "$w/$name"-*.tokens.jsonl | head -1)"
done
python3 bench/token_runs.py "$w"/*.tokens.jsonl | head -1
finish call3
