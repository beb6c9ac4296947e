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
# failed or the binary did not finish.
run_gpu_tests() {
  local rc=0
  "$bin/mstar_gpu_tests" >"$out/gpu-tests.log" 2>&1 || rc=$?
  grep -E "^\[  (PASSED|FAILED|SKIPPED) |measured|tests ran" "$out/gpu-tests.log" || true
  if ((rc != 0)); then
    echo "GPU tests failed (exit $rc; $out/gpu-tests.log)" >&2
    return 1
  fi
}
