#!/usr/bin/env bash
# Server CPU time per request: reads a running server's user+system time from /proc before
# and after one loadgen run, and divides by the requests served. Steadier than req/s when
# the load generator shares the machine's cores.
#
#   examples/bench/cpu-per-request.sh <server pid> <name> <loadgen args...>
#   e.g. examples/bench/cpu-per-request.sh "$(pgrep -f 'genied .*serve')" get \
#          --url http://127.0.0.1:18080/v1 --method POST --header "authorization: Bearer $T" \
#          --ids ids.txt --body '{"resource":"leads","action":"get","id":{id}}'
#
# CONCURRENCY (default 64) and DURATION (seconds, default 6) tune the run; the loadgen binary
# is taken from ${CARGO_TARGET_DIR:-target}/release/examples/loadgen.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
LOADGEN=${CARGO_TARGET_DIR:-$ROOT/target}/release/examples/loadgen
PID=$1 NAME=$2
shift 2
cpu() { awk '{print $14 + $15}' "/proc/$PID/stat"; }
OUT=$(mktemp)
trap 'rm -f "$OUT"' EXIT
before=$(cpu)
"$LOADGEN" --name "$NAME" --concurrency "${CONCURRENCY:-64}" --duration-secs "${DURATION:-6}" \
  --warmup-secs 0 --out "$OUT" "$@" >/dev/null
after=$(cpu)
python3 - "$OUT" "$before" "$after" "$(getconf CLK_TCK)" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
ticks = int(sys.argv[3]) - int(sys.argv[2])
per = 1e6 * ticks / int(sys.argv[4]) / max(r["requests"], 1)
print(f"{r['name']}: {r['rps']:.0f} req/s, p99 {r['p99_ms']} ms, errors {r['errors']}, "
      f"server CPU {per:.1f} µs/request")
PY
