#!/usr/bin/env bash
# The README's main job: installs what is missing, builds, and generates
# text with mstar-run on the embedded default model (a small Nemotron-H trained
# on public-domain novels, models/embedded/default) through the KV and
# recurrent pools.
# Extra arguments go to mstar-run (try --json, --max-tokens 64, --prompt ...).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
scripts/install-deps.sh
scripts/build.sh build -DMSTAR_CUDA=AUTO -- mstar-run >/dev/null
if (($# == 0)); then
  set -- --prompt "Once upon a time" --prompt "She looked at him and said" --max-tokens 48
fi
exec build/launcher/mstar-run "$@"
