#!/usr/bin/env bash
# scripts/python-env.sh [VENV_DIR]: makes (once) a Python virtual environment
# with the pinned packages the server tests drive mstar-serve with: the
# official `openai` client. Prints the environment's python on stdout.
# Default VENV_DIR: .venv at the project root (git-ignored).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
venv=${1:-$root/.venv}
pins=(openai==3.57.0)
stamp=$venv/.mstar-pins
if [[ -x $venv/bin/python && -f $stamp && $(cat "$stamp") == "${pins[*]}" ]]; then
  echo "$venv/bin/python"
  exit 0
fi
python3 -m venv "$venv" >&2
"$venv/bin/python" -m pip install -q --disable-pip-version-check "${pins[@]}" >&2 || {
  echo "python-env: installing ${pins[*]} from PyPI failed" >&2
  exit 1
}
echo "${pins[*]}" >"$stamp"
echo "$venv/bin/python"
