#!/usr/bin/env bash
# Session 31's first device call.
set -uo pipefail
cd "$(dirname "$0")/.."
(cd .carry && tar xJf bins.tar.xz)
source bench/device_env.sh
export PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$out/env.txt"
echo "libnccl on path: ${nccl_lib:-none}"; [[ -n ${nccl_lib:-} ]] && strings "$nccl_lib" | grep -m1 -E "NCCL version" 
t0=$SECONDS
left() { (( SECONDS - t0 < $1 )); }
sum() { grep -E "^\[  (PASSED|FAILED|SKIPPED) |tests ran|^\[  FAILED " "$1" | head -30; }
echo "== main: every GPU test"
timeout 200 "$bin/mstar_gpu_tests" >"$out/gpu-tests.log" 2>&1; echo "exit $? ($((SECONDS - t0)) s)"; sum "$out/gpu-tests.log"
for tag in ssd pf da; do
  left 330 || break
  case $tag in ssd) f='gpu_recurrent*:*ssd*:*nemotron*:gpu_model*';; *) f='*attention*:*nemotron*:gpu_model*';; esac
  echo "== $tag tests ($((SECONDS - t0)) s)"
  timeout 90 "$bin/mstar_gpu_tests-$tag" --gtest_filter="$f" >"$out/gpu-tests-$tag.log" 2>&1; echo "exit $?"; sum "$out/gpu-tests-$tag.log"
done
for st in attention:main attention:pf attention:da ssd:main ssd:ssd; do
  left 430 || break
  s=${st%%:*}; tag=${st#*:}; b=$bin/mstar-gpu-bench; [[ $tag != main ]] && b=$b-$tag
  echo "== $s $tag ($((SECONDS - t0)) s)"
  timeout 60 "$b" --suite "$s" --graphs --rounds 7 --json >"$out/$s-$tag.jsonl"; echo "exit $?"
done
if left 470; then
  echo "== delta ours ($((SECONDS - t0)) s)"
  timeout 40 "$bin/mstar-gpu-bench" --delta-rule-only --delta-batches 1 16 64 --graphs --rounds 7 --json >"$out/delta-ours.jsonl"; echo "exit $?"
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site
  timeout 90 python3 bench/fla_delta_rule.py --json >"$out/fla.jsonl" 2>"$out/fla.err"; echo "fla exit $? ($((SECONDS - t0)) s)"; tail -3 "$out/fla.err"
fi
python3 - "$out" <<'PY'
import json, sys, os
d = sys.argv[1]
for f in sorted(os.listdir(d)):
    if f.endswith(".jsonl"):
        for l in open(os.path.join(d, f)):
            if l.startswith("{"):
                r = json.loads(l)
                name = r.get("case") or r.get("name")
                extra = f"{r.get('dtype','')} {r.get('mode','')}" if "mode" in r else ""
                print(f"{f[:-6]:16s} {str(name):40s} {extra:22s} {r['us_per_call']:10.2f} us")
PY
echo "done ($((SECONDS - t0)) s)"
