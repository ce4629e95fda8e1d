#!/usr/bin/env bash
# Runs Schemathesis (from PyPI) against a fresh genied, driven by its own
# `GET /v1/openapi.json`. Loopback only; everything lives in a temporary directory that is
# removed at the end. Exit status: Schemathesis's (non-zero on any failed check).
#
#   examples/schemathesis.sh                 # 25 examples per operation, 2000 envelopes
#   MAX_EXAMPLES=100 ENVELOPE_EXAMPLES=5000 examples/schemathesis.sh
#   GENIED_BIN=path/to/genied examples/schemathesis.sh   # skip the cargo build
#   SCHEMATHESIS_VENV=~/.cache/st-venv examples/schemathesis.sh  # reuse an installed venv
set -euo pipefail

MAX_EXAMPLES="${MAX_EXAMPLES:-25}"
ENVELOPE_EXAMPLES="${ENVELOPE_EXAMPLES:-2000}"
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
WORK="$(mktemp -d)"
PID=""
cleanup() {
    # SIGKILL: the data directory goes anyway, and a genied draining a job backlog can take
    # long to act on SIGTERM.
    if [ -n "$PID" ]; then kill -KILL "$PID" 2>/dev/null || true; wait "$PID" 2>/dev/null || true; fi
    rm -rf "$WORK"
}
trap cleanup EXIT

VENV="${SCHEMATHESIS_VENV:-$WORK/venv}"
if [ ! -x "$VENV/bin/schemathesis" ]; then
    python3 -m venv "$VENV"
    "$VENV/bin/pip" install --quiet schemathesis
fi
"$VENV/bin/schemathesis" --version

if [ -z "${GENIED_BIN:-}" ]; then
    (cd "$ROOT" && cargo build --quiet --bin genied)
    GENIED_BIN="${CARGO_TARGET_DIR:-$ROOT/target}/debug/genied"
fi

DATA="$WORK/data"
PORT="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
BASE="http://127.0.0.1:$PORT"

"$GENIED_BIN" admin create-user --create-data-dir --data-dir "$DATA" --email fuzz@example.com --name Fuzz >/dev/null
TOKEN="$("$GENIED_BIN" admin issue-token --data-dir "$DATA" --email fuzz@example.com --ttl-seconds 86400)"

# Rate limits off: Schemathesis sends thousands of requests from one client.
"$GENIED_BIN" serve --data-dir "$DATA" --listen "127.0.0.1:$PORT" \
    --rate-limit-per-minute 0 --session-rate-limit-per-minute 0 --login-rate-limit-per-minute 0 \
    --log-level warn >"$WORK/genied.log" 2>&1 &
PID=$!
for _ in $(seq 1 100); do
    curl -fsS "$BASE/healthz" >/dev/null 2>&1 && break
    sleep 0.1
done
curl -fsS "$BASE/healthz" >/dev/null

# `logout` is left out: it would revoke the session the run authenticates with. Security
# parameters are not generated (Schemathesis would add a random `X-API-Key` next to the token,
# which the server rightly answers 401, and almost nothing would reach the handlers).
COMMON=(--header "Authorization: Bearer $TOKEN"
    --checks not_a_server_error,response_schema_conformance
    --generation-with-security-parameters false --no-color)
# Schemathesis keeps a cache in the working directory: keep it in the temporary one.
cd "$WORK"
set +e
echo "== every operation, $MAX_EXAMPLES examples each"
"$VENV/bin/schemathesis" run "$BASE/v1/openapi.json" "${COMMON[@]}" \
    --exclude-operation-id logout --max-examples "$MAX_EXAMPLES"
STATUS=$?
# `POST /v1` is one operation whose body is a `oneOf` of every action's envelope; it gets a
# larger budget so most actions are reached.
echo "== POST /v1 envelopes, $ENVELOPE_EXAMPLES examples"
"$VENV/bin/schemathesis" run "$BASE/v1/openapi.json" "${COMMON[@]}" \
    --include-operation-id envelope --phases fuzzing --max-examples "$ENVELOPE_EXAMPLES"
[ $? -eq 0 ] || STATUS=1
set -e
if grep -q "panicked" "$WORK/genied.log"; then
    echo "genied logged a panic:" >&2
    grep -A3 "panicked" "$WORK/genied.log" >&2
    STATUS=1
fi
exit "$STATUS"
