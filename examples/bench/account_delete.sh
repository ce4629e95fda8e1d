#!/usr/bin/env bash
# An account's delete at scale, and what it does to everyone else's writes meanwhile.
#
#   examples/bench/account_delete.sh
#   LEADS="1000000" SKIP_BUILD=1 examples/bench/account_delete.sh
#   GENIED=/path/to/an/older/genied SKIP_BUILD=1 examples/bench/account_delete.sh   # another build
#
# For each size N (LEADS, default "100000 1000000"), on a fresh data directory: one user
# with N leads, N/10 conversations, N/100 genies and N/100 documents (examples/bench
# scale-seed), an admin, and another user with a genie of their own. With the server
# started, the other user creates leads one after another (examples/loadgen, concurrency 1)
# for BASELINE seconds (default 5) alone, then again while the admin deletes the first
# user's account (`users delete`), from WAIT seconds (default 2) into that run until the
# account is gone. Prints the delete's time and the other user's create latencies in
# both runs (median, p99, worst): a delete is the one write here whose work grows with the
# data, and what it holds the single writer for is what every other user waits for
# (docs/performance.md, round twenty-nine). Raw results stay in $OUT; every process it
# starts is stopped on exit.
set -euo pipefail

LEADS=${LEADS:-"100000 1000000"}
BASELINE=${BASELINE:-5}
WAIT=${WAIT:-2}
PORT=${GENIED_PORT:-18080}
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
TARGET=${CARGO_TARGET_DIR:-$ROOT/target}
WORK=$(mktemp -d "${TMPDIR:-/tmp}/genied-account-delete.XXXXXX")
OUT=${OUT:-$WORK/results}
mkdir -p "$OUT"
PIDS=()

# shellcheck source=examples/bench/common.sh
. "$ROOT/examples/bench/common.sh"

cleanup() {
  stop_all
  [[ "${KEEP:-0}" == 1 ]] || rm -rf "$WORK/data"
}
trap cleanup EXIT INT TERM

now() { date +%s.%N; }
since() { python3 -c "import time,sys; print(f'{time.time() - float(sys.argv[1]):.2f}')" "$1"; }

if [[ "${SKIP_BUILD:-0}" != 1 ]]; then
  say "building genied (release)"
  (cd "$ROOT" && cargo build --release --bin genied --example bench --example loadgen)
fi
GENIED=${GENIED:-$TARGET/release/genied}
BENCH=$TARGET/release/examples/bench
LOADGEN=$TARGET/release/examples/loadgen
PASSWORD=Vq7t-k3Lw-pass-9xRz-perf
G=http://127.0.0.1:$PORT

user() { # email [role]
  "$GENIED" --data-dir "$D" --log-level warn admin create-user --email "$1" --password "$PASSWORD" \
    --role "${2:-standard_user}" | json "['id']"
}
login() { # email
  curl -sf "$G/v1/auth/login" -H 'content-type: application/json' \
    -d "{\"email\":\"$1\",\"password\":\"$PASSWORD\"}" | json "['data']['access_token']"
}
creates() { # name seconds: the other user's lead creates, one client
  "$LOADGEN" --name "$1" --concurrency 1 --duration-secs "$2" --warmup-secs 1 \
    --header "authorization: Bearer $OTHER" --url "$G/v1" --method POST \
    --body "{\"resource\":\"leads\",\"action\":\"create\",\"data\":{\"agentId\":\"$GENIE\",\"name\":\"Other lead\",\"email\":\"other.lead@example.test\"}}" \
    --out "$OUT/$1.json" >/dev/null
}

ROWS=()
for leads in $LEADS; do
  say "$leads leads, $((leads / 10)) conversations, $((leads / 100)) genies, $((leads / 100)) documents"
  D=$WORK/data; rm -rf "$D"
  "$GENIED" --data-dir "$D" --log-level warn migrate >/dev/null
  GONE=$(user leaving@example.test)
  user admin@example.test internal_admin >/dev/null
  user other@example.test >/dev/null
  "$BENCH" scale-seed --data-dir "$D" --email leaving@example.test --users 1 --leads "$leads" \
    --conversations $((leads / 10)) --genies $((leads / 100)) --documents $((leads / 100)) \
    --ids-out "$WORK/ids" >/dev/null
  S=$("$BENCH" start --ready-url "$G/readyz" --log "$WORK/genied-$leads.log" -- \
    "$GENIED" --data-dir "$D" serve --listen "127.0.0.1:$PORT" \
    --rate-limit-per-minute 0 --session-rate-limit-per-minute 0)
  PID=$(json "['pid']" <<<"$S"); PIDS+=("$PID")
  ADMIN=$(login admin@example.test); OTHER=$(login other@example.test)
  GENIE=$(curl -sf "$G/v1" -H "authorization: Bearer $OTHER" -H 'content-type: application/json' \
    -d '{"resource":"genies","action":"create","data":{"genieName":"Other","category":"Sales","description":"x"}}' \
    | json "['data']['genie']['id']")
  creates "alone.$leads" "$BASELINE"
  # Long enough to outlast the delete: under 100 µs of it a lead on this VM.
  creates "during.$leads" $((WAIT + 10 + leads / 10000)) &
  LG=$!; PIDS+=("$LG")
  sleep $((1 + WAIT))
  t0=$(now)
  ANSWER=$(curl -s "$G/v1" -H "authorization: Bearer $ADMIN" -H 'content-type: application/json' \
    -d "{\"resource\":\"users\",\"action\":\"delete\",\"id\":\"$GONE\"}")
  answered=$(since "$t0")
  # A large account's delete answers 202 after --account-delete-wait-seconds (an older
  # build: 408 at the request's timeout) and goes on; it is done when the account is no
  # longer found.
  CODE=$(python3 -c "import json,sys; a=json.load(sys.stdin); print(a['error']['code'] if 'error' in a
else '202' if a['data'].get('status') == 'deleting' else 'ok')" <<<"$ANSWER")
  [[ $CODE =~ ^(ok|202|REQUEST_TIMEOUT)$ ]] || { echo "the delete failed: $ANSWER" >&2; exit 1; }
  for _ in $(seq 1200); do
    status=$(curl -s -o /dev/null -w '%{http_code}' "$G/v1" -H "authorization: Bearer $ADMIN" \
      -H 'content-type: application/json' -d "{\"resource\":\"users\",\"action\":\"get\",\"id\":\"$GONE\"}")
    [[ $status == 404 ]] && break
    sleep 0.5
  done
  [[ $status == 404 ]] || { echo "the account was not gone after 10 minutes" >&2; exit 1; }
  took=$(since "$t0")
  wait "$LG"
  stop "$PID"
  ROWS+=("$leads $took $answered $CODE")
done

python3 - "$OUT" "${ROWS[@]}" <<'PY'
import json, sys
out, rows = sys.argv[1], sys.argv[2:]
lat = lambda r: f"{r['p50_ms']:.1f} / {r['p99_ms']:.1f} / {r['max_ms']:.0f}"
print("\n| leads of the account | its delete: gone after | answered after | the other user's creates alone: median / p99 / worst ms | during the delete |")
print("|---:|---:|---:|---:|---:|")
for row in rows:
    leads, took, answered, code = row.split()
    answer = f"{float(answered):.2f} s" + ("" if code == "ok" else f" ({code})")
    alone = json.load(open(f"{out}/alone.{leads}.json"))
    during = json.load(open(f"{out}/during.{leads}.json"))
    print(f"| {int(leads):,} | {float(took):.2f} s | {answer} | {lat(alone)} | {lat(during)} |")
PY
