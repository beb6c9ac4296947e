#!/usr/bin/env bash
# Builds bench/profile/kernel_times.cpp (a CUPTI injection library: per-kernel
# device time of any CUDA process) into .profile/libmstar_kernel_times.so,
# against CUPTI 13.0 from PyPI (the device's driver runs CUDA 13.0; its
# torch brings libcupti.so.13 at run time, see bench/h200_profile.sh).
#   bash bench/profile/build.sh
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
work=$root/.profile
mkdir -p "$work"
if [[ ! -f $work/cupti/nvidia/cu13/include/cupti.h ]]; then
  python3 -m pip download --no-deps -q -d "$work" nvidia-cuda-cupti==13.0.85
  mkdir -p "$work/cupti"
  (cd "$work/cupti" && unzip -q -o "$work"/nvidia_cuda_cupti-13.0.85*.whl)
fi
inc=$work/cupti/nvidia/cu13/include
lib=$work/cupti/nvidia/cu13/lib
g++ -std=c++20 -O2 -fPIC -shared -Wall -Wextra -I"$inc" -I/usr/local/cuda/include \
  "$root/bench/profile/kernel_times.cpp" -L"$lib" -l:libcupti.so.13 \
  -o "$work/libmstar_kernel_times.so"
echo "built $work/libmstar_kernel_times.so"
