#!/usr/bin/env bash
# Session 31's last device call: main with decode-attn2, the warp gated norm,
# ssd-fast and the delta-rule decode variants merged; each new default next
# to the old one (env switches) in the same call.
set -uo pipefail
cd "$(dirname "$0")/.."
(cd .carry && tar xJf bins.tar.xz)
source bench/device_env.sh
export PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0
final=$out; out=$(mktemp -d); export OUT=$out
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$out/env.txt"
t0=$SECONDS
left() { (( SECONDS - t0 < $1 )); }
sum() { grep -E "^\[  (PASSED|FAILED|SKIPPED) |tests ran|^\[  FAILED " "$1" | grep -v "SKIPPED \] gpu_nccl\|SKIPPED \] gpu_tensor" | head -30; }
b=$bin/mstar-gpu-bench
echo "== main: every GPU test"
timeout 170 "$bin/mstar_gpu_tests" >"$out/gpu-tests.log" 2>&1; echo "exit $? ($((SECONDS - t0)) s)"; sum "$out/gpu-tests.log"
grep -E "^\[ error +\] ssd_chunked" "$out/gpu-tests.log" | awk '{print $(NF-2)}' | sort -g | tail -1 | sed 's/^/ssd chunked worst: /'
if left 200; then
  echo "== ssd old kernels' tests ($((SECONDS - t0)) s)"
  MSTAR_SSD_VARIANT=0 timeout 40 "$bin/mstar_gpu_tests" --gtest_filter='gpu_recurrent*ssd*' >"$out/gpu-tests-ssd0.log" 2>&1; echo "exit $?"; sum "$out/gpu-tests-ssd0.log"
fi
echo "== ssd: new / old ($((SECONDS - t0)) s)"
timeout 40 "$b" --suite ssd --graphs --rounds 5 --json >"$out/ssd-new.jsonl"; echo "exit $?"
MSTAR_SSD_VARIANT=0 timeout 40 "$b" --suite ssd --graphs --rounds 5 --json >"$out/ssd-old.jsonl"; echo "exit $?"
echo "== conv + gated norm: warp / block ($((SECONDS - t0)) s)"
timeout 40 "$b" --suite conv --graphs --rounds 5 --json >"$out/conv-warp.jsonl"; echo "exit $?"
MSTAR_GATED_NORM_WARP=0 timeout 40 "$b" --suite conv --graphs --rounds 5 --json >"$out/conv-block.jsonl"; echo "exit $?"
if left 330; then
  echo "== delta decode variants ($((SECONDS - t0)) s)"
  timeout 80 "$b" --delta-decode-all-variants --delta-batches 1 16 64 --rounds 7 --json --graphs | grep '^{' >"$out/delta-variants.jsonl"; echo "exit $?"
fi
if left 360; then
  echo "== fla decode ($((SECONDS - t0)) s)"
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site
  timeout 60 python3 bench/fla_delta_rule.py --json --decode-only --f32-only >"$out/fla.jsonl" 2>"$out/fla.err"; echo "exit $?"
fi
if left 390; then
  echo "== decode attention variants ($((SECONDS - t0)) s)"
  timeout 70 "$b" --suite attention --rows 1 4 16 64 256 --prefill-rows 1 --attn-variants --graphs --rounds 5 --json >"$out/attention-variants.jsonl"; echo "exit $?"
fi
if left 420; then
  echo "== roofline prefill ($((SECONDS - t0)) s)"
  ck=$(mktemp -d)
  python3 bench/make_checkpoint.py --size nemotron_h-0.56b --out "$ck/nh056" | tail -1
  timeout 60 "$bin/mstar-bench-model-gpu" --model "$ck/nh056" --batch 1 8 --prompt-len 2048 \
    --new-tokens 2 --repeats 3 --json >"$out/nh056-prefill.jsonl"; echo "exit $?"
fi
python3 - "$out" <<'PY'
import json, sys, os
d = sys.argv[1]
for f in sorted(os.listdir(d)):
    if f.endswith(".jsonl") and not f.startswith("nh056"):
        for l in open(os.path.join(d, f)):
            if l.startswith("{"):
                r = json.loads(l)
                name = r.get("case") or r.get("name")
                if f.startswith("fla") and "graph20" not in r.get("mode", ""): continue
                v = r.get("decode_variant", "")
                print(f"{f[:-6]:20s} {str(name):44s} {r.get('mode','')!s:16s} {v!s:4s} {r['us_per_call']:10.2f}")
    elif f.startswith("nh056"):
        for l in open(os.path.join(d, f)):
            if l.startswith("{"):
                r = json.loads(l); rr = r.get("roofline_prefill", {})
                print("prefill", r.get("batch"), "compute_fraction", round(rr.get("compute_fraction", 0), 3))
PY
echo "done ($((SECONDS - t0)) s)"
tar czf "$final/call5.tgz" -C "$out" .
