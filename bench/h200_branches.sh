#!/usr/bin/env bash
# Main's GPU binaries and those of kernel branches, side by side in one
# device call (packed by scripts/pack-branches.sh), results under $OUT:
#   1. main's whole mstar_gpu_tests (gpu-tests.log);
#   2. each branch build (.carry/bin/mstar_gpu_tests-TAG): the kernel,
#      model and Nemotron-H / Qwen3.5 GPU tests (gpu-tests-TAG.log);
#   3. `mstar-gpu-bench --suite SUITE --graphs --rounds 7` of main and of
#      every branch, interleaved by suite (SUITE-main.jsonl, SUITE-TAG.jsonl),
#      then a table of us per call and the ratio to main's.
# SUITES defaults to "attention ssd"; TESTS (a gtest filter) to the kernel,
# model and family tests.
#   bash bench/h200_branches.sh
set -uo pipefail
source "$(dirname "$0")/device_env.sh"
if [[ -f $carry/bins.tar.xz && ! -d $bin ]]; then tar xJf "$carry/bins.tar.xz" -C "$carry"; fi
export NCCL_NVLS_ENABLE=0
suites=(${SUITES:-attention ssd})
filter=${TESTS:-'gpu_attention*:gpu_recurrent*:gpu_delta_rule*:gpu_conv*:gpu_model*:*nemotron*:*qwen3_5*'}
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$out/env.txt"
t0=$SECONDS
summary() {  # LOG: the gtest result lines
  grep -E "^\[  (PASSED|FAILED|SKIPPED) |tests ran|^\[  FAILED " "$1" | head -20
}
echo "== main: every GPU test"
timeout 200 "$bin/mstar_gpu_tests" >"$out/gpu-tests.log" 2>&1
echo "exit $? ($((SECONDS - t0)) s)"
summary "$out/gpu-tests.log"
tags=()
for f in "$bin"/mstar_gpu_tests-*; do
  [[ -x $f ]] && tags+=("${f##*-}")
done
for tag in "${tags[@]}"; do
  echo "== $tag: GPU tests ($((SECONDS - t0)) s)"
  timeout 120 "$bin/mstar_gpu_tests-$tag" --gtest_filter="$filter" >"$out/gpu-tests-$tag.log" 2>&1
  echo "exit $?"
  summary "$out/gpu-tests-$tag.log"
done
for suite in "${suites[@]}"; do
  for tag in main "${tags[@]}"; do
    b=$bin/mstar-gpu-bench
    [[ $tag != main ]] && b=$b-$tag
    echo "== $suite, $tag ($((SECONDS - t0)) s)"
    timeout 90 "$b" --suite "$suite" --graphs --rounds 7 --json >"$out/$suite-$tag.jsonl"
    echo "exit $?"
  done
done
python3 - "$out" "${suites[@]}" -- main "${tags[@]}" <<'PY'
import json, os, sys
out, rest = sys.argv[1], sys.argv[2:]
cut = rest.index("--")
suites, tags = rest[:cut], rest[cut + 1:]
for suite in suites:
    rows = {}
    for tag in tags:
        path = os.path.join(out, f"{suite}-{tag}.jsonl")
        if not os.path.exists(path):
            continue
        for line in open(path):
            if line.startswith("{"):
                r = json.loads(line)
                rows.setdefault(r["case"], {})[tag] = r["us_per_call"]
    print(f"-- {suite}: us per call (ratio main / branch: > 1 is faster than main)")
    print(f"{'case':40s}" + "".join(f"{t:>18s}" for t in tags))
    for case, us in rows.items():
        base = us.get("main")
        cells = []
        for t in tags:
            v = us.get(t)
            if v is None:
                cells.append(f"{'-':>18s}")
            elif t == "main" or not base:
                cells.append(f"{v:18.1f}")
            else:
                cells.append(f"{v:10.1f} ({base / v:4.2f})")
        print(f"{case:40s}" + "".join(cells))
PY
