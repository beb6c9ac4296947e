#!/usr/bin/env bash
# The memory operations, barriers and waits of a CUDA kernel's SASS in program order, read
# from an object this machine built (no GPU needed): what a kernel's critical path starts
# with, e.g. whether an item's page-id loads wait behind its q loads (session 53, the mma
# walk's order of an item's start). cuobjdump is not in the toolkit here; the script takes
# it from PyPI's nvidia-cuda-cuobjdump into ~/.cache/mstar-cudatools the first time.
#   bash bench/profile/sass_order.sh OBJECT.o 'DEMANGLED KERNEL SUBSTRING' [MAX_LINES]
#   bash bench/profile/sass_order.sh build/kernels/CMakeFiles/mstar_kernels.dir/cuda/attention_decode_mma.cu.o \
#     'attend_decode_mma<128, 4, true>'
# Prints the kernel's mangled name, then one line per load, store, copy, prefetch, barrier,
# chain wait (ACQBULK: griddepcontrol.wait) or release (PREEXIT) with its offset.
# Exit 2: no such kernel in the object (the names it has are listed).
set -euo pipefail
if (($# < 2)) || [[ $1 == -h || $1 == --help ]]; then
  sed -n '2,12p' "$0" | sed 's/^# \{0,1\}//'
  exit $(($# < 2 ? 1 : 0))
fi
obj=$1 want=$2 max=${3:-120}
[[ -f $obj ]] || { echo "sass_order.sh: no object file '$obj'" >&2; exit 1; }
# cuobjdump -sass runs nvdisasm: both from PyPI where the toolkit lacks them.
if ! command -v cuobjdump >/dev/null || ! command -v nvdisasm >/dev/null; then
  tools=${XDG_CACHE_HOME:-$HOME/.cache}/mstar-cudatools
  if [[ ! -x $tools/bin/cuobjdump || ! -x $tools/bin/nvdisasm ]]; then
    echo "sass_order.sh: fetching cuobjdump and nvdisasm (PyPI nvidia-cuda-cuobjdump," \
      "nvidia-cuda-nvdisasm) into $tools" >&2
    mkdir -p "$tools/bin"
    python3 -m pip download --quiet --no-deps nvidia-cuda-cuobjdump nvidia-cuda-nvdisasm \
      -d "$tools/wheel" >&2
    for w in "$tools"/wheel/*.whl; do python3 -m zipfile -e "$w" "$tools/unpacked"; done
    for t in cuobjdump nvdisasm; do
      f=$(find "$tools/unpacked" -name "$t" -type f | head -1)
      [[ -n $f ]] || { echo "sass_order.sh: no $t in the wheels" >&2; exit 1; }
      install -m 755 "$f" "$tools/bin/$t"
    done
  fi
  PATH=$tools/bin:$PATH
fi
cuobjdump=$(command -v cuobjdump)
names=$("$cuobjdump" -symbols "$obj" | grep -o '_Z[^ ]*' | sort -u)
mangled=""
while read -r m; do
  if [[ $(c++filt "$m") == *"$want"* ]]; then
    mangled=$m
    break
  fi
done <<<"$names"
if [[ -z $mangled ]]; then
  echo "sass_order.sh: no kernel matching '$want' in $obj; it has:" >&2
  while read -r m; do c++filt "$m" | cut -c1-160; done <<<"$names" >&2
  exit 2
fi
echo "$mangled"
"$cuobjdump" -sass -fun "$mangled" "$obj" |
  grep -E '(LDG|STG|LDS|STS|LDSM|LDGSTS|LDGDEPBAR|DEPBAR|UBLKCP|UTMALDG|SYNCS|BAR|ACQBULK|PREEXIT|CCTL|ATOM|RED|MEMBAR|EXIT)' |
  sed -E 's@^ +@@; s@ +/\* 0x[0-9a-f]+ \*/ *$@@; s@ +@ @g' | head -n "$max"
