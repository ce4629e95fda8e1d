#!/usr/bin/env bash
# Where a request's instructions go: the release server runs under callgrind, serves N
# requests of each scenario at concurrency 1 after a warm-up, and each scenario's counts are
# dumped on their own (`callgrind_control -z` before, `-d` after). Prints instructions per
# request (whole process: HTTP, the async threads, the writer, the dispatcher, the
# checkpointer) and the functions with the most inclusive instructions. Instruction counts do
# not depend on what else the machine is doing.
#
#   cargo build --release --bin genied --example bench
#   examples/bench/callgrind.sh                          # create, update, gupdate, get; N=300
#   SCENARIOS="create gupdate" N=500 KEEP=/tmp/cg examples/bench/callgrind.sh
#   GENIED=/path/to/other/genied examples/bench/callgrind.sh    # another build, same script
#
# LOG_LEVEL (default warn) is the server's `--log-level`; `info`, `serve`'s default, counts
# what a request's log context costs as the service runs out of the box.
# KEEP keeps the dumps (open them with callgrind_annotate or kcachegrind). For line-level
# detail build with `CARGO_PROFILE_RELEASE_STRIP=false CARGO_PROFILE_RELEASE_DEBUG=line-tables-only`.
# Needs valgrind, curl and python3.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
REL=${CARGO_TARGET_DIR:-$ROOT/target}/release
GENIED=${GENIED:-$REL/genied} BENCH=$REL/examples/bench
N=${N:-300} TOP=${TOP:-30} LOG_LEVEL=${LOG_LEVEL:-warn}
SCENARIOS=${SCENARIOS:-create update gupdate get}
PORT=${PORT:-18293}
WORK=$(mktemp -d "${TMPDIR:-/tmp}/genied-callgrind.XXXXXX")
PID=""
cleanup() { [[ -n "$PID" ]] && kill -9 "$PID" 2>/dev/null; rm -rf "$WORK"; }
trap cleanup EXIT
say() { echo "== $*" >&2; }
json() { python3 -c "import json,sys; print(json.load(sys.stdin)$1)"; }

wait_ready() { # generous: valgrind starts the server some 50 times slower
  for _ in $(seq 600); do
    curl -fs "http://127.0.0.1:$PORT/readyz" >/dev/null && return 0
    kill -0 "$PID" 2>/dev/null || { echo "server exited; log:" >&2; cat "$WORK/serve.log" >&2; exit 1; }
    sleep 0.5
  done
  echo "server not ready after 300 s" >&2; exit 1
}
serve() { # [wrapper...]: the server in the background on the set-up directory
  "$@" "$GENIED" --data-dir "$GD" --log-level "$LOG_LEVEL" serve --listen "127.0.0.1:$PORT" \
    --rate-limit-per-minute 0 --session-rate-limit-per-minute 0 >"$WORK/serve.log" 2>&1 &
  PID=$!
  wait_ready
}

# Set-up without valgrind: a user, a genie and one lead.
GD=$WORK/data EMAIL=cg@example.test PASSWORD=Vq7t-k3Lw-pass-9xRz-cgrd
serve
"$GENIED" --data-dir "$GD" --log-level warn admin create-user --email "$EMAIL" --password "$PASSWORD" >/dev/null
SETUP=$("$BENCH" genied-setup --url "http://127.0.0.1:$PORT" --email "$EMAIL" --password "$PASSWORD")
TOKEN=$(json "['token']" <<<"$SETUP") GENIE=$(json "['genie_id']" <<<"$SETUP")
LEAD=$(curl -fs "http://127.0.0.1:$PORT/v1" -H "authorization: Bearer $TOKEN" -H 'content-type: application/json' \
  -d "{\"resource\":\"leads\",\"action\":\"create\",\"data\":{\"agent_id\":\"$GENIE\",\"name\":\"Ada\",\"email\":\"ada@example.test\"}}" |
  json "['data']['lead']['id']")
kill "$PID"; wait "$PID" 2>/dev/null || true; PID=""

# N requests on one keep-alive connection; each must answer 200 or 201.
drive() { # body-template count
  python3 - "$PORT" "$TOKEN" "$1" "$2" <<'PY'
import http.client, sys
port, token, body, n = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
c = http.client.HTTPConnection("127.0.0.1", int(port), timeout=120)
h = {"authorization": f"Bearer {token}", "content-type": "application/json"}
for i in range(n):
    c.request("POST", "/v1", body.replace("{i}", str(i)), h)
    r = c.getresponse(); r.read()
    if r.status not in (200, 201):
        sys.exit(f"request {i}: HTTP {r.status}")
PY
}
body_of() {
  case $1 in
    create) echo "{\"resource\":\"leads\",\"action\":\"create\",\"data\":{\"agent_id\":\"$GENIE\",\"name\":\"Bench {i}\",\"email\":\"bench{i}@example.test\",\"status\":\"new\",\"priority\":\"medium\"}}" ;;
    update) echo "{\"resource\":\"leads\",\"action\":\"update\",\"id\":$LEAD,\"data\":{\"name\":\"Ada {i}\"}}" ;;
    gupdate) echo "{\"resource\":\"genies\",\"action\":\"update\",\"id\":\"$GENIE\",\"data\":{\"description\":\"Bench {i}\"}}" ;;
    get) echo "{\"resource\":\"leads\",\"action\":\"get\",\"id\":$LEAD}" ;;
    *) echo "unknown scenario $1" >&2; exit 1 ;;
  esac
}

say "server under callgrind ($GENIED)"
serve valgrind --tool=callgrind --callgrind-out-file="$WORK/cg.%p" --dump-instr=no
declare -A IR
for s in $SCENARIOS; do
  body=$(body_of "$s")
  drive "$body" 100 # warm: pools, statement caches, the allocator, the versions' first snapshot
  callgrind_control -z "$PID" >/dev/null 2>&1
  drive "$body" "$N"
  callgrind_control -d "$s" "$PID" >/dev/null 2>&1
  dump=$(ls -t "$WORK"/cg.*.* | head -1)
  mv "$dump" "$WORK/$s.callgrind"
  ir=$(awk '/^(summary|totals):/ {print $2; exit}' "$WORK/$s.callgrind")
  IR[$s]=$((ir / N))
  say "$s: $((ir / N)) instructions per request"
done
kill "$PID" 2>/dev/null || true; wait "$PID" 2>/dev/null || true; PID=""

echo
echo "| scenario (concurrency 1, $N requests) | instructions per request |"
echo "|---|---:|"
for s in $SCENARIOS; do printf '| %s | %s |\n' "$s" "${IR[$s]}"; done
for s in $SCENARIOS; do
  echo
  echo "## $s: the $TOP functions with the most inclusive instructions (per request)"
  callgrind_annotate --inclusive=yes "$WORK/$s.callgrind" 2>/dev/null |
    awk -v n="$N" -v top="$TOP" '
      /^-+$/ { dash++; next }
      dash >= 3 && $1 ~ /^[0-9,]+$/ && shown < top {
        ir = $1; gsub(",", "", ir); $1 = ""; $2 = "";
        printf "%10d  %s\n", ir / n, substr($0, 3); shown++ }'
done
if [[ -n "${KEEP:-}" ]]; then mkdir -p "$KEEP" && cp "$WORK"/*.callgrind "$KEEP"/ && say "dumps kept in $KEEP"; fi
