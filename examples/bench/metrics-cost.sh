#!/usr/bin/env bash
# What the Prometheus metrics cost per request, in CPU instructions: the server runs under
# callgrind twice, without and with `--metrics-listen`, and the instructions it executes
# (all threads) while serving N requests at concurrency 1 are divided by N. Instruction
# counts do not depend on what else the machine is doing, so the figure holds on a busy
# machine where req/s would not.
#
#   cargo build --release --bin genied --example bench
#   examples/bench/metrics-cost.sh            # N=1000 requests per scenario
#
# Needs valgrind (callgrind, callgrind_control), curl and python3. Binaries are taken from
# ${CARGO_TARGET_DIR:-target}/release.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
REL=${CARGO_TARGET_DIR:-$ROOT/target}/release
GENIED=$REL/genied BENCH=$REL/examples/bench
N=${N:-1000}
PORT=${PORT:-18291} METRICS_PORT=${METRICS_PORT:-18292}
WORK=$(mktemp -d "${TMPDIR:-/tmp}/genied-metrics-cost.XXXXXX")
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

# Setup without valgrind: a user, a genie and one lead to get.
GD=$WORK/data EMAIL=cost@example.test PASSWORD=Vq7t-k3Lw-pass-9xRz-mtrx
"$GENIED" --data-dir "$GD" --log-level warn serve --listen "127.0.0.1:$PORT" \
  --rate-limit-per-minute 0 --session-rate-limit-per-minute 0 >"$WORK/serve.log" 2>&1 &
PID=$!
wait_ready
"$GENIED" --data-dir "$GD" --log-level warn admin create-user --email "$EMAIL" --password "$PASSWORD" >/dev/null
SETUP=$("$BENCH" genied-setup --url "http://127.0.0.1:$PORT" --email "$EMAIL" --password "$PASSWORD")
TOKEN=$(json "['token']" <<<"$SETUP") GENIE=$(json "['genie_id']" <<<"$SETUP")
LEAD=$(curl -fs "http://127.0.0.1:$PORT/v1" -H "authorization: Bearer $TOKEN" -H 'content-type: application/json' \
  -d "{\"resource\":\"leads\",\"action\":\"create\",\"data\":{\"agent_id\":\"$GENIE\",\"name\":\"Ada\",\"email\":\"ada@example.test\",\"phone\":\"+15550100\"}}" |
  json "['data']['lead']['id']")
kill "$PID"; wait "$PID" 2>/dev/null || true; PID=""

# N requests on one keep-alive connection; each must answer 200.
drive() { # body-template count
  python3 - "$PORT" "$TOKEN" "$1" "$2" <<'PY'
import http.client, sys, itertools
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

GET="{\"resource\":\"leads\",\"action\":\"get\",\"id\":\"$LEAD\"}"
CREATE="{\"resource\":\"leads\",\"action\":\"create\",\"data\":{\"agent_id\":\"$GENIE\",\"name\":\"Lead {i}\",\"email\":\"l{i}@example.test\"}}"
declare -A RESULT
for mode in off on; do
  flags=()
  [[ $mode == on ]] && flags=(--metrics-listen "127.0.0.1:$METRICS_PORT")
  say "metrics $mode: server under callgrind"
  # Each mode on its own copy of the set-up directory, so both serve the same database.
  rm -rf "$GD.$mode" && cp -a "$GD" "$GD.$mode"
  valgrind --tool=callgrind --callgrind-out-file="$WORK/cg.$mode.%p" --dump-instr=no \
    "$GENIED" --data-dir "$GD.$mode" --log-level warn serve --listen "127.0.0.1:$PORT" \
    --rate-limit-per-minute 0 --session-rate-limit-per-minute 0 "${flags[@]}" >"$WORK/serve.log" 2>&1 &
  PID=$!
  wait_ready
  for scenario in get create; do
    body=$GET; [[ $scenario == create ]] && body=$CREATE
    drive "$body" 100 # warm: connection pools, statement caches, allocator
    callgrind_control -z "$PID" >/dev/null
    drive "$body" "$N"
    callgrind_control -d "$scenario" "$PID" >/dev/null
    dump=$(ls -t "$WORK"/cg.$mode.*.* | head -1)
    ir=$(awk '/^(summary|totals):/ {print $2; exit}' "$dump")
    RESULT[$mode.$scenario]=$((ir / N))
    echo "  $scenario: $((ir / N)) instructions per request" >&2
  done
  if [[ $mode == on ]]; then # the exporter really was on and counted what we sent
    curl -fs "http://127.0.0.1:$METRICS_PORT/metrics" | grep -E '^genied_http_requests_total\{.*leads.*(get|create)' >&2 ||
      echo "  (the scrape of /metrics failed under valgrind; the counts above stand)" >&2
  fi
  kill "$PID" 2>/dev/null || true; wait "$PID" 2>/dev/null || true; PID=""
done

echo
echo "| request (concurrency 1, $N each) | metrics off | metrics on | cost of metrics |"
echo "|---|---:|---:|---:|"
for scenario in get create; do
  off=${RESULT[off.$scenario]} on=${RESULT[on.$scenario]}
  python3 -c "import sys; off,on=int(sys.argv[2]),int(sys.argv[3]); print(f'| leads {sys.argv[1]} | {off:,} | {on:,} | {on-off:+,} ({100*(on-off)/off:+.1f}%) |')" "$scenario" "$off" "$on"
done
