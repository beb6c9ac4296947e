#!/usr/bin/env bash
# Packs main's GPU binaries and those of kernel branches for one device call
# that measures them side by side (bench/h200_branches.sh). Each BRANCH:TAG
# is built in a worktree of its own (/work/wt-pack-TAG unless the branch is
# checked out somewhere already), for sm_90 with ccache, and its
# mstar_gpu_tests / mstar-gpu-bench land in .carry/bin as NAME-TAG; main's
# (BUILD_DIR, default build/) keep their names. The binaries go into
# .carry/bins.tar.xz (the device copy carries 64 MiB at most), the shared
# libraries into .carry/libs.tar.xz (scripts/pack-device.sh).
#   scripts/pack-branches.sh [BRANCH:TAG ...]    e.g. ssd-mma:ssd decode-attn:da
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
export CCACHE_DIR=${CCACHE_DIR:-/work/.ccache}
BUILD_DIR=${BUILD_DIR:-$root/build} "$root/scripts/pack-device.sh" mstar_gpu_tests mstar-gpu-bench
for spec in "$@"; do
  branch=${spec%%:*}
  tag=${spec#*:}
  if [[ -z $branch || -z $tag || $branch == "$spec" ]]; then
    echo "pack-branches: '$spec' is not BRANCH:TAG" >&2
    exit 2
  fi
  wt=$(git -C "$root" worktree list --porcelain |
    awk -v b="refs/heads/$branch" '/^worktree /{w=$2} $0=="branch "b{print w}')
  if [[ -z $wt ]]; then
    wt=/work/wt-pack-$tag
    git -C "$root" worktree add -q "$wt" "$branch"
  fi
  echo "pack-branches: $branch ($wt) as -$tag" >&2
  cmake -S "$wt" -B "$wt/build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DMSTAR_NCCL=OFF \
    -DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_CUDA_COMPILER_LAUNCHER=ccache >/dev/null
  cmake --build "$wt/build" -j "${JOBS:-2}" --target mstar_gpu_tests mstar-gpu-bench
  strip -o "$root/.carry/bin/mstar_gpu_tests-$tag" "$wt/build/tests/mstar_gpu_tests"
  strip -o "$root/.carry/bin/mstar-gpu-bench-$tag" "$wt/build/bench/mstar-gpu-bench"
done
# xz -9e: its 64 MiB dictionary spans the binaries, which share most of
# their code (scripts/pack-device.sh's PACK_XZ): about half of tar's -6.
(cd "$root/.carry" && rm -f bins.tar.xz && tar cf - bin | xz -9e -T2 >bins.tar.xz && rm -rf bin)
du -sh "$root/.carry"
