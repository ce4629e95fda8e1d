#!/usr/bin/env bash
# Server CPU time per request: reads a running server's user+system time from /proc before
# and after one loadgen run, and divides by the requests served. Steadier than req/s when
# the load generator shares the machine's cores. Also per thread (each thread's CPU and its
# voluntary context switches per request), which shows the hand-offs between threads a
# request costs: a read on a read thread is two wake-ups.
#
#   examples/bench/cpu-per-request.sh <server pid> <name> <loadgen args...>
#   e.g. examples/bench/cpu-per-request.sh "$(pgrep -f 'genied .*serve')" get \
#          --url http://127.0.0.1:18080/v1 --method POST --header "authorization: Bearer $T" \
#          --ids ids.txt --body '{"resource":"leads","action":"get","id":{id}}'
#
# CONCURRENCY (default 64) and DURATION (seconds, default 6) tune the run; the loadgen binary
# is taken from ${CARGO_TARGET_DIR:-target}/release/examples/loadgen. SYSCALLS=1 also counts
# the server's system calls per request over the run, all and the kinds a request makes
# (`perf stat` on its tracepoints; needs Debian's linux-perf and root): futex calls show
# threads waiting on a lock another holds, which CPU time alone does not. Counting adds a
# little to each system call, so take the CPU figure of an A/B from runs without it.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
LOADGEN=${CARGO_TARGET_DIR:-$ROOT/target}/release/examples/loadgen
PID=$1 NAME=$2
shift 2
cpu() { awk '{print $14 + $15}' "/proc/$PID/stat"; }
# One line per thread: id, name, CPU ticks, voluntary context switches.
threads() {
  for t in /proc/"$PID"/task/*; do
    printf '%s %s %s %s\n' "${t##*/}" "$(tr ' ' _ <"$t/comm")" "$(awk '{print $14 + $15}' "$t/stat")" \
      "$(awk '/^voluntary_ctxt_switches/ {print $2}' "$t/status")"
  done
}
OUT=$(mktemp) T0=$(mktemp) T1=$(mktemp) SYS=$(mktemp)
trap 'rm -f "$OUT" "$T0" "$T1" "$SYS"' EXIT
COUNT=()
if [[ "${SYSCALLS:-0}" == 1 ]]; then
  KINDS=(futex fcntl pread64 recvfrom writev epoll_wait mprotect)
  EVENTS=raw_syscalls:sys_enter$(printf ',syscalls:sys_enter_%s' "${KINDS[@]}")
  COUNT=(perf stat -x, -e "$EVENTS" -p "$PID" -o "$SYS" --)
fi
threads >"$T0"
before=$(cpu)
"${COUNT[@]}" "$LOADGEN" --name "$NAME" --concurrency "${CONCURRENCY:-64}" \
  --duration-secs "${DURATION:-6}" --warmup-secs 0 --out "$OUT" "$@" >/dev/null
after=$(cpu)
threads >"$T1"
python3 - "$OUT" "$before" "$after" "$(getconf CLK_TCK)" "$T0" "$T1" "$SYS" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
n = max(r["requests"], 1)
tick = 1e6 / int(sys.argv[4])
per = tick * (int(sys.argv[3]) - int(sys.argv[2])) / n
print(f"{r['name']}: {r['rps']:.0f} req/s, p99 {r['p99_ms']} ms, errors {r['errors']}, "
      f"server CPU {per:.1f} µs/request")
before = {l.split()[0]: l.split() for l in open(sys.argv[5])}
for t in (l.split() for l in open(sys.argv[6])):
    b = before.get(t[0], [t[0], t[1], "0", "0"])
    cpu, switches = tick * (int(t[2]) - int(b[2])) / n, (int(t[3]) - int(b[3])) / n
    if cpu >= 0.5 or switches >= 0.05:
        print(f"  {t[1]:<18} {cpu:7.1f} µs CPU  {switches:5.2f} voluntary switches  per request")
# perf stat -x, lines: count,unit,event,...
counts = [l.split(",") for l in open(sys.argv[7]) if l.count(",") >= 2 and not l.startswith("#")]
if counts:
    print("  system calls per request: " + ", ".join(
        f"{e.split('_enter')[-1].lstrip('_') or 'all'} {int(c) / n:.2f}"
        for c, _, e, *_ in counts if c.strip().isdigit()))
PY
