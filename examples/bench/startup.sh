#!/usr/bin/env bash
# Exec-to-ready and memory of genied on a data directory you give it (seed one first, e.g. the
# scale mode's 1,000,000 leads: examples/bench/scale.sh with KEEP=1, or `bench scale-seed`).
#
#   DATA=/tmp/genied-1m examples/bench/startup.sh
#   DATA=/tmp/genied-1m TOKEN=... IDS=ids.txt RUNS=5 examples/bench/startup.sh
#
# Starts and stops (SIGTERM) the server RUNS times (default 5) and prints each run's
# exec-to-ready (from exec to the first 200 from /readyz, polled every millisecond by
# `bench start`) and how long the SIGTERM took; then, on the last start, idle RSS after
# 1 s, and with TOKEN and IDS (a bearer token and a file of lead ids) peak RSS (VmHWM) and
# RSS after LOAD_SECS (default 10) of 64 clients getting leads (examples/loadgen). The
# first start may replay a WAL another process left; the later ones show the steady figure.
# The load average is printed beside the figures: the machine may be shared.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
TARGET=${CARGO_TARGET_DIR:-$ROOT/target}
GENIED=${GENIED:-$TARGET/release/genied}
BENCH=${BENCH:-$TARGET/release/examples/bench}
LOADGEN=${LOADGEN:-$TARGET/release/examples/loadgen}
DATA=${DATA:?DATA=<a data directory>}
RUNS=${RUNS:-5}
PORT=${GENIED_PORT:-18090}
LOG=$(mktemp "${TMPDIR:-/tmp}/genied-startup.XXXXXX")
PID=""
cleanup() {
  [[ -z "$PID" ]] || kill -KILL "$PID" 2>/dev/null || true
  rm -f "$LOG"
}
trap cleanup EXIT INT TERM
rss_kb() { awk -v f="$2:" '$1 == f {print $2}' "/proc/$1/status"; }
start() {
  "$BENCH" start --ready-url "http://127.0.0.1:$PORT/readyz" --log "$LOG" -- \
    "$GENIED" --data-dir "$DATA" serve --listen "127.0.0.1:$PORT" \
    --rate-limit-per-minute 0 --session-rate-limit-per-minute 0
}
gone() { # the process has exited: no longer there, or a zombie its parent has not reaped yet
  [[ "$(awk '{print $3}' "/proc/$1/stat" 2>/dev/null)" =~ ^(Z|X|)$ ]]
}
stop() { # prints the ms SIGTERM took
  local t0 t1
  t0=$(date +%s%N)
  kill -TERM "$1"
  # Until the process has exited, not until it is reaped: `bench start` leaves the server to
  # the init process, which on some machines reaps its orphans a second or two later.
  until gone "$1"; do sleep 0.005; done
  t1=$(date +%s%N)
  echo $(((t1 - t0) / 1000000))
}
field() { python3 -c "import json,sys; print(json.load(sys.stdin)['$1'])"; }

echo "genied: $GENIED; data: $DATA ($(du -sh "$DATA" | cut -f1)); load average $(cut -d' ' -f1-3 /proc/loadavg)"
for i in $(seq "$RUNS"); do
  S=$(start)
  PID=$(field pid <<<"$S")
  READY=$(field ready_ms <<<"$S")
  if [[ "$i" == "$RUNS" ]]; then break; fi
  sleep 0.5
  printf 'run %d: exec to ready %.1f ms; SIGTERM to exit %s ms\n' "$i" "$READY" "$(stop "$PID")"
  PID=""
done
sleep 1
IDLE=$(rss_kb "$PID" VmRSS)
printf 'run %d: exec to ready %.1f ms; idle RSS %.1f MB\n' "$RUNS" "$READY" "$(echo "$IDLE / 1024" | bc -l)"
if [[ -n "${TOKEN:-}" && -n "${IDS:-}" ]]; then
  "$LOADGEN" --name peak --concurrency 64 --duration-secs "${LOAD_SECS:-10}" --warmup-secs 0 \
    --header "authorization: Bearer $TOKEN" --url "http://127.0.0.1:$PORT/v1" --method POST \
    --ids "$IDS" --out /dev/null --body '{"resource":"leads","action":"get","id":{id}}' >/dev/null
  sleep 1
  printf 'after %s s of 64 clients: peak RSS (VmHWM) %.1f MB, RSS now %.1f MB\n' "${LOAD_SECS:-10}" \
    "$(echo "$(rss_kb "$PID" VmHWM) / 1024" | bc -l)" "$(echo "$(rss_kb "$PID" VmRSS) / 1024" | bc -l)"
fi
printf 'SIGTERM to exit %s ms; load average %s\n' "$(stop "$PID")" "$(cut -d' ' -f1-3 /proc/loadavg)"
PID=""
