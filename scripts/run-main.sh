#!/usr/bin/env bash
# The README's main job: installs what is missing, builds, starts mstar-serve
# on the embedded default model (a small Nemotron-H trained on public-domain
# novels, models/embedded/default) at 127.0.0.1:8000, waits for /health,
# prints the URL and a curl line, streams one chat reply to the terminal, and
# keeps serving until Ctrl-C.
#
#   scripts/run-main.sh [--once] [--port N] [-- EXTRA mstar-serve FLAGS]
#
# --once stops the server after that first request (the test command uses
# it). mstar-run stays for offline runs (build/launcher/mstar-run --help).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
once=0
port=${MSTAR_PORT:-8000}
extra=()
while (($#)); do
  case $1 in
    --once) once=1 ;;
    --port) port=$2; shift ;;
    -h | --help) sed -n '2,12p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    --) shift; extra=("$@"); break ;;
    *) echo "run-main: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
  shift
done
scripts/install-deps.sh
scripts/build.sh build -DMSTAR_CUDA=AUTO -- mstar-serve >/dev/null
url=http://127.0.0.1:$port
log=build/mstar-serve.log
build/launcher/mstar-serve --host 127.0.0.1 --port "$port" "${extra[@]}" 2>"$log" &
server=$!
trap 'kill -TERM $server 2>/dev/null; wait $server 2>/dev/null' EXIT INT TERM
for _ in $(seq 1 600); do
  curl -sf "$url/health" >/dev/null 2>&1 && break
  kill -0 $server 2>/dev/null || { cat "$log" >&2; echo "run-main: mstar-serve exited (log above)" >&2; exit 1; }
  sleep 0.1
done
curl -sf "$url/health" >/dev/null || { echo "run-main: no /health after 60 s" >&2; exit 1; }
model=$(curl -sf "$url/v1/models" | python3 -c 'import json,sys; print(json.load(sys.stdin)["data"][0]["id"])')
body='{"model":"'$model'","messages":[{"role":"user","content":"It was a dark and stormy night, and"}],"max_tokens":80,"temperature":0,"stream":true}'
cat <<MSG

mstar-serve is up at $url (OpenAI-compatible: /v1/completions, /v1/chat/completions,
/v1/models, /health, /metrics). Try:

  curl -sN $url/v1/chat/completions -H 'Content-Type: application/json' \\
    -d '$body'

A streaming chat request now (the model continues text; it does not follow instructions):

MSG
printf 'user: It was a dark and stormy night, and\nassistant:'
curl -sN --max-time 120 "$url/v1/chat/completions" -H 'Content-Type: application/json' -d "$body" |
  python3 -u -c '
import json, sys
for line in sys.stdin:
    line = line.strip()
    if not line.startswith("data: ") or line == "data: [DONE]":
        continue
    event = json.loads(line[6:])
    if "error" in event:
        sys.exit("run-main: the server answered an error: %s" % event["error"]["message"])
    for choice in event.get("choices", []):
        sys.stdout.write(choice["delta"].get("content") or "")
        sys.stdout.flush()
print()
'
echo
echo "The server's log (one line per request):"
cat "$log"
if ((once)); then
  exit 0
fi
echo "Serving until Ctrl-C; the log follows."
tail -n 0 -f "$log" &
wait $server
