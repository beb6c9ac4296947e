#!/usr/bin/env bash
# Makes bench/.venv (ignored) with the load generator bench/serve_bench.py
# drives mstar-serve with: AIPerf, pinned in bench/serve-requirements.txt,
# every dependency pinned in bench/serve-constraints.txt. Needs PyPI the first
# time (about 1.2 GB, two minutes); a no-op once the pinned AIPerf is there.
# Prints the venv's python.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
venv=${MSTAR_BENCH_VENV:-$root/bench/.venv}
want=$(sed -n 's/^aiperf==//p' "$root/bench/serve-requirements.txt")
if [[ -x $venv/bin/aiperf ]] && "$venv/bin/python" -c "import importlib.metadata as m, sys
sys.exit(m.version('aiperf') != '$want')" 2>/dev/null; then
  echo "$venv/bin/python"
  exit 0
fi
python3 -m venv "$venv" >&2 || {
  echo "serve_venv: python3 -m venv failed (Debian: apt-get install python3-venv)" >&2
  exit 1
}
"$venv/bin/python" -m pip install -q --disable-pip-version-check \
  -r "$root/bench/serve-requirements.txt" -c "$root/bench/serve-constraints.txt" >&2
echo "$venv/bin/python"
