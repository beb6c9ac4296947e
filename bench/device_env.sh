# Sourced by the bench/h200_*.sh device scripts: sets root, out (results,
# $OUT or ./h200-out), carry and bin (what scripts/pack-device.sh packed),
# unpacks the carried shared libraries once and puts them on the library path.
# Defines run_gpu_tests (below).
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
out=${OUT:-$root/h200-out}
mkdir -p "$out"
carry=$root/.carry
if [[ ! -d $carry/lib ]]; then tar xJf "$carry/libs.tar.xz" -C "$carry"; fi
export LD_LIBRARY_PATH=$carry/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
# NCCL comes with the device's CUDA Python packages (nvidia-nccl), not with
# /usr/local/cuda: binaries built with NCCL (MSTAR_NCCL) find it there.
nccl_lib=$(find $(python3 -c 'import site; print(" ".join(site.getsitepackages()))' 2>/dev/null) \
  -name 'libnccl.so.2' 2>/dev/null | head -1)
if [[ -n $nccl_lib ]]; then export LD_LIBRARY_PATH=$(dirname "$nccl_lib"):$LD_LIBRARY_PATH; fi
export MSTAR_FIXTURES_DIR=$root/tests/fixtures
bin=$carry/bin
# On the device a missing GPU, or one the sm_90 binaries cannot run on, fails
# the GPU tests and benches instead of skipping them (tests/gpu/gpu_support.hpp).
export MSTAR_REQUIRE_GPU=1

# Runs mstar_gpu_tests with its log in $out/gpu-tests.log, prints the summary
# lines, and fails (stopping the calling script under set -e) when any test
# failed or the binary did not finish. GPU_TESTS_SHARD=i/n runs the i-th of n
# shards (gtest's own sharding, 0-based; log gpu-tests-i-of-n.log): the whole
# suite takes longer than one 10-minute device call (session 45: 115 of 245
# tests in 410 s on an H100), so a call runs a shard.
run_gpu_tests() {
  local rc=0 log=$out/gpu-tests.log
  if [[ -n ${GPU_TESTS_SHARD:-} ]]; then
    export GTEST_SHARD_INDEX=${GPU_TESTS_SHARD%/*} GTEST_TOTAL_SHARDS=${GPU_TESTS_SHARD#*/}
    log=$out/gpu-tests-$GTEST_SHARD_INDEX-of-$GTEST_TOTAL_SHARDS.log
  fi
  "$bin/mstar_gpu_tests" >"$log" 2>&1 || rc=$?
  unset GTEST_SHARD_INDEX GTEST_TOTAL_SHARDS
  grep -E "^\[  (PASSED|FAILED|SKIPPED) |measured|tests ran" "$log" || true
  if ((rc != 0)); then
    echo "GPU tests failed (exit $rc; $log)" >&2
    return 1
  fi
}

# Prints one line a run of mstar-bench-model-gpu --json output FILE, labelled
# LABEL: the decode step, its roofline fraction and the tokens' digest (the
# one-call A/B scripts under bench/results/*-calls/ print these).
model_summary() {  # LABEL FILE
  python3 - "$1" "$2" <<'PY'
import json, sys
for l in open(sys.argv[2]):
    if l.startswith("{"):
        r = json.loads(l); d = r.get("roofline_decode")  # absent with --roofline-rounds 0
        roof = f"{d['bandwidth_fraction']:.3f}" if d else "-"
        print(f"{sys.argv[1]:9} p{r['prompt_len']:<5} b{r['batch']:<3} step {r['step_ms']*1000:7.1f} us"
              f"  roofline {roof}  digest {r['tokens_digest']}"
              + ("" if r.get("tokens_same_every_run", True) else "  RUNS DREW DIFFERENT TOKENS"))
PY
}

# The folder of the CUPTI 13 library the device's torch brings (for the
# bench/profile injection library), or nothing.
cupti_lib_dir() {
  python3 - <<'PY'
import glob, site, os
for d in site.getsitepackages() + [site.getusersitepackages()]:
    for f in glob.glob(os.path.join(d, "nvidia", "*", "lib", "libcupti.so.13*")):
        print(os.path.dirname(f)); raise SystemExit
PY
}
