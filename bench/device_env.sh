# Sourced by the bench/h200_*.sh device scripts: sets root, out (results,
# $OUT or ./h200-out), carry and bin (what scripts/pack-device.sh packed),
# unpacks the carried shared libraries once and puts them on the library path.
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
out=${OUT:-$root/h200-out}
mkdir -p "$out"
carry=$root/.carry
if [[ ! -d $carry/lib ]]; then tar xJf "$carry/libs.tar.xz" -C "$carry"; fi
export LD_LIBRARY_PATH=$carry/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
export MSTAR_FIXTURES_DIR=$root/tests/fixtures
bin=$carry/bin
