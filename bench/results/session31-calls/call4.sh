#!/usr/bin/env bash
# Session 31's fourth device call: Nsight Compute over the SSD chunk kernels.
set -uo pipefail
cd "$(dirname "$0")/.."
(cd .carry && tar xJf bins.tar.xz)
source bench/device_env.sh
ncu=/usr/local/cuda/bin/ncu
t0=$SECONDS
timeout 240 $ncu --set full --import-source no -k regex:'chunk_(state|output|cb)_kernel|state_pass' -c 8 \
  "$bin/mstar-gpu-bench" --suite ssd --rounds 1 >"$out/ncu-ssd.txt" 2>&1
echo "ncu exit $? ($((SECONDS - t0)) s)"
grep -E "^  [a-z_:]+.*\(|Duration|Registers Per|Achieved Occupancy|Theoretical Occupancy|Compute \(SM\) Throughput|Memory Throughput|DRAM Throughput|Block Size|Grid Size|Shared Memory Configuration Size|Dynamic Shared|Static Shared" "$out/ncu-ssd.txt" | head -120
