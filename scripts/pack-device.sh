#!/usr/bin/env bash
# Builds the GPU binaries here (CUDA on, sm_90) and packs them for the device
# machine into .carry/ (ignored): stripped binaries in .carry/bin and the
# shared libraries a stock Ubuntu 24.04 + CUDA 13 machine lacks in
# .carry/libs.tar.xz. Then, on the device: bash bench/h200_e2e.sh
#   [PACK_XZ=1] scripts/pack-device.sh [TARGET...]   (default: the h200_e2e.sh / h200_engine.sh set;
#   bench/h200_serve.sh needs mstar-serve mstar-bench-serve-baseline)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD_DIR:-$root/build}
# A tree scripts/run-tests.sh configured on this GPU-less machine holds PTX
# only (MSTAR_CUDA_PTX_ONLY): the device would JIT every kernel. Rebuild it
# for sm_90 first.
if grep -q '^MSTAR_CUDA_PTX_ONLY:BOOL=ON' "$build/CMakeCache.txt" 2>/dev/null; then
  echo "pack-device: $build builds PTX only; run: cmake -S $root -B $build -DMSTAR_CUDA_PTX_ONLY=OFF" >&2
  exit 1
fi
targets=(mstar_gpu_tests mstar-gpu-bench mstar-bench-model-gpu mstar-run)
if (($#)); then targets=("$@"); fi
cmake --build "$build" -j "${JOBS:-2}" --target "${targets[@]}"
# Only the binaries packed last; lib/ (unpacked on the device) would hide new libraries.
rm -rf "$root/.carry/bin" "$root/.carry/lib"
mkdir -p "$root/.carry/bin"
for t in "${targets[@]}"; do
  f=$(find "$build" -name "$t" -type f -perm -u+x | head -1)
  strip -o "$root/.carry/bin/$t" "$f"
done
# libjpeg.so.62 and libpng16.so.16: image decoding (models/vision); Ubuntu's
# libjpeg-turbo is libjpeg.so.8. libonig.so.5 and libutf8proc.so.2: the
# tokenizer's regexes and normalizers (Ubuntu 24.04's utf8proc is .so.3).
# UCX 1.13 (libucp, libucs, libuct, libucm; libnuma under them) and xxhash:
# mstar_gpu_tests links mstar::transport for the CUDA IPC tests. Their tcp
# and shared-memory transports live in libuct itself; the modules directory
# (ib, cma) stays behind, which the tests (tcp over lo) do not need.
# libcaf_io and libcaf_openssl: mstar_gpu_tests links mstar::actors for the
# P/D pair over CUDA IPC (the control plane's middleman over TLS; Ubuntu
# 24.04 has OpenSSL 3's libssl and libcrypto itself).
libs=(libopenblas.so.0 libgfortran.so.5 libquadmath.so.0 libfmt.so.9 libcaf_core.so.0.17.6
  libcaf_io.so.0.17.6 libcaf_openssl.so.0.17.6
  libspdlog.so.1.10 libjpeg.so.62 libpng16.so.16 libonig.so.5 libutf8proc.so.2
  libucp.so.0 libucs.so.0 libuct.so.0 libucm.so.0 libnuma.so.1 libxxhash.so.0)
stage=$(mktemp -d)
mkdir -p "$stage/lib"
for l in "${libs[@]}"; do cp -L "/lib/x86_64-linux-gnu/$l" "$stage/lib/"; done
tar cJf "$root/.carry/libs.tar.xz" -C "$stage" lib
rm -rf "$stage"
# PACK_XZ=1: the binaries as .carry/bins.tar.xz instead of bin/ (the call
# unpacks it: `(cd .carry && tar xJf bins.tar.xz)`). xz -9e's 64 MiB
# dictionary spans the binaries, which share most of their code: four GPU
# binaries (~140 MB stripped) pack to ~12 MB, against ~28 MB at tar's
# default -6, so they fit the device call's 64 MiB beside the tree.
if [[ ${PACK_XZ:-0} == 1 ]]; then
  rm -f "$root/.carry/bins.tar.xz"
  tar cf - -C "$root/.carry" bin | xz -9e -T2 >"$root/.carry/bins.tar.xz"
  rm -rf "$root/.carry/bin"
fi
du -sh "$root/.carry"
