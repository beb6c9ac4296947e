#!/usr/bin/env bash
# scripts/build-caf-tsan.sh DIR [CXX]
# Builds libcaf_core 0.17.6 (Debian's source, the same version and build
# configuration as libcaf-dev) with ThreadSanitizer into DIR, once, and
# prints the library's path. The TSan tree links the actor tests against it:
# Debian's libcaf_core is not instrumented, so TSan would not see the
# mailbox's synchronisation and would report every message hand-off.
# CXX (default clang++) must be the TSan tree's compiler: clang links its
# TSan runtime into the executable, GCC uses libtsan.so, and a library
# instrumented for one does not run under the other. -O0 -g1 in unity
# batches of 8, line tables for TSan's stacks: 62.6 CPU-s (34.7 s at -j2)
# against 182 CPU-s (94 s) at -O1 one file a unit, and the TSan actor tests
# ran 31.6 s against 30.0 s on it (session 41, this machine).
# The source comes from Debian's mirror, checked against the sha256 of the
# Debian source package (actor-framework_0.17.6-2.1.dsc).
set -euo pipefail
dir=$1
cxx=${2:-clang++}
lib=$dir/lib/libcaf_core.so.0.17.6
# DIR/compiler names the compiler and flags that built DIR's library: a tree
# built otherwise (GCC before stop 39, -O1 before stop 41) is built again.
built_by="$cxx -O0 unity8"
if [[ -f $lib && $(cat "$dir/compiler" 2>/dev/null) == "$built_by" ]]; then
  echo "$lib"
  exit 0
fi
rm -rf "$dir/build" "$dir/lib" "$dir/compiler"
url=http://deb.debian.org/debian/pool/main/a/actor-framework/actor-framework_0.17.6.orig.tar.gz
sha=e2bf5bd243f08bb7d8adde197cfe3e6d71314ed3378fe0692f8932f4c3b3928c
mkdir -p "$dir"
tarball=$dir/caf.tar.gz
curl -fsSL --retry 3 -o "$tarball" "$url" || {
  echo "build-caf-tsan: could not download $url" >&2
  exit 1
}
echo "$sha  $tarball" | sha256sum -c --quiet - || {
  echo "build-caf-tsan: $url does not match its Debian checksum" >&2
  exit 1
}
tar xzf "$tarball" -C "$dir"
src=$dir/actor-framework-0.17.6
cmake -S "$src" -B "$dir/build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_CXX_COMPILER="$cxx" -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O0 -g1 -DNDEBUG" \
  -DCMAKE_UNITY_BUILD=ON -DCMAKE_UNITY_BUILD_BATCH_SIZE=8 \
  -DCMAKE_CXX_FLAGS="-fsanitize=thread" -DCMAKE_LIBRARY_OUTPUT_DIRECTORY="$dir/lib" \
  -DCAF_NO_IO=yes -DCAF_NO_OPENSSL=yes -DCAF_NO_EXAMPLES=yes -DCAF_NO_UNIT_TESTS=yes \
  -DCAF_NO_TOOLS=yes -DCAF_NO_PYTHON=yes -DCAF_NO_OPENCL=yes -DCAF_NO_SUMMARY=yes \
  -DCAF_NO_COMPILER_CHECK=yes >"$dir/configure.log" 2>&1 || {
  cat "$dir/configure.log" >&2
  exit 1
}
# Same configuration header as Debian's: same ABI.
diff -q <(grep -v '^//' /usr/include/caf/detail/build_config.hpp) \
  <(grep -v '^//' "$dir/build/libcaf_core/caf/detail/build_config.hpp") >/dev/null || {
  echo "build-caf-tsan: CAF's build_config.hpp differs from Debian's" >&2
  exit 1
}
cmake --build "$dir/build" -j "${MSTAR_JOBS:-$(nproc)}" --target libcaf_core_shared >"$dir/build.log" 2>&1 || {
  tail -30 "$dir/build.log" >&2
  exit 1
}
cp -P "$dir"/build/lib/libcaf_core.so* "$dir/lib/" 2>/dev/null || true
[[ -f $lib ]] || { echo "build-caf-tsan: $lib was not built" >&2; exit 1; }
echo "$built_by" >"$dir/compiler"
echo "$lib"
