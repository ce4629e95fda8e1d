#!/usr/bin/env bash
# Lead creates, A/B: for each configuration, each round, a server on a new data directory,
# then RUNS_1 runs of creates at one connection and RUNS_64 at 64 (examples/loadgen), each
# once the server is idle; per run the rate, p50, p99, the slowest create and the server's
# CPU per create (from /proc), and per configuration the medians. The slowest create is the
# figure a stall shows in (docs/performance.md, round thirty-two, measured the search
# indexer's batch and the checkpoint's interval this way).
#
#   examples/bench/creates.sh main="$T/release/genied" other="/tmp/other/genied"
#   examples/bench/creates.sh main="$G" wide="env GENIED_SOME_SETTING=1 $G"
#
# Each argument is NAME=COMMAND: the command (split on spaces) that runs genied; the script
# adds `--data-dir … serve …` to it. Configurations run in turn within a round, in the given
# order in odd rounds and the other way in even ones. ROUNDS (default 3), RUNS_1 (4),
# RUNS_64 (2), DURATION (5 s a run), WARMUP (1 s), GENIED_PORT (18380), LEADS (0: leads
# seeded into each data directory before its runs, with the server stopped, as compare.sh
# seeds its 100,000; the tails at one connection differ with the database's size, round
# thirty-four in docs/performance.md); BENCH and LOADGEN
# default to the release examples under CARGO_TARGET_DIR. Raw results stay in $OUT, every
# server's log beside them; with SLOW_MS set, each run's creates slower than that many
# milliseconds too (`slow.ROUND.NAME.C.RUN`, with when each started, for the server's log).
# Every process it starts is stopped on exit.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
TARGET=${CARGO_TARGET_DIR:-$ROOT/target}
BENCH=${BENCH:-$TARGET/release/examples/bench}
LOADGEN=${LOADGEN:-$TARGET/release/examples/loadgen}
ROUNDS=${ROUNDS:-3}
RUNS_1=${RUNS_1:-4}
RUNS_64=${RUNS_64:-2}
DURATION=${DURATION:-5}
SLOW_MS=${SLOW_MS:-}
LEADS=${LEADS:-0}
WARMUP=${WARMUP:-1}
PORT=${GENIED_PORT:-18380}
WORK=$(mktemp -d "${TMPDIR:-/tmp}/genied-creates.XXXXXX")
OUT=${OUT:-$WORK/results}
mkdir -p "$OUT"
PIDS=()
# shellcheck source=examples/bench/common.sh
. "$ROOT/examples/bench/common.sh"
cleanup() {
  stop_all
  rm -rf "$WORK/data"
}
trap cleanup EXIT INT TERM

(( $# > 0 )) || { echo "usage: $0 NAME=COMMAND..." >&2; exit 2; }
NAMES=()
declare -A COMMAND_OF
for arg in "$@"; do
  [[ "$arg" == *=* && -n "${arg%%=*}" && -n "${arg#*=}" ]] || { echo "not NAME=COMMAND: $arg" >&2; exit 2; }
  NAMES+=("${arg%%=*}"); COMMAND_OF[${arg%%=*}]=${arg#*=}
done
EMAIL=bench@example.test PASSWORD=Vq7t-k3Lw-pass-9xRz-perf
TSV=$OUT/runs.tsv
printf 'round\tname\tconcurrency\trps\tp50_ms\tp99_ms\tmax_ms\tcpu_us\terrors\n' >"$TSV"

one() { # round name: a new data directory, its server, the runs, the server stopped
  local round=$1 name=$2 d=$WORK/data/$2.$1 cmd pid setup token genie c before after
  read -ra cmd <<<"${COMMAND_OF[$name]}"
  mkdir -p "$WORK/data"
  serve() { # log-suffix: the server on $d, its pid
    "$BENCH" start --ready-url "http://127.0.0.1:$PORT/readyz" --log "$OUT/$name.$round$1.log" -- \
      "${cmd[@]}" --data-dir "$d" serve --listen "127.0.0.1:$PORT" \
      --rate-limit-per-minute 0 --session-rate-limit-per-minute 0 | json "['pid']"
  }
  pid=$(serve ""); PIDS+=("$pid")
  "${cmd[@]}" --data-dir "$d" --log-level warn admin create-user --email "$EMAIL" --password "$PASSWORD" >/dev/null
  setup=$("$BENCH" genied-setup --url "http://127.0.0.1:$PORT" --email "$EMAIL" --password "$PASSWORD")
  token=$(json "['token']" <<<"$setup"); genie=$(json "['genie_id']" <<<"$setup")
  if (( LEADS > 0 )); then
    stop "$pid"
    "$BENCH" genied-seed --data-dir "$d" --email "$EMAIL" --genie "$genie" --leads "$LEADS" \
      --ids-out "$WORK/ids" >/dev/null
    pid=$(serve ".seeded"); PIDS+=("$pid")
  fi
  local runs=()
  for _ in $(seq "$RUNS_1"); do runs+=(1); done
  for _ in $(seq "$RUNS_64"); do runs+=(64); done
  local slow=() k=0
  [[ -z "$SLOW_MS" ]] || slow=(--slow-ms "$SLOW_MS")
  for c in "${runs[@]}"; do
    k=$((k + 1))
    settle "$pid"
    before=$(cpu_ticks "$pid")
    "$LOADGEN" --name "$name" --concurrency "$c" --duration-secs "$DURATION" --warmup-secs "$WARMUP" \
      "${slow[@]}" --out "$OUT/run.json" --url "http://127.0.0.1:$PORT/v1" --method POST \
      --header "authorization: Bearer $token" --expect-status 201 \
      --body "{\"resource\":\"leads\",\"action\":\"create\",\"data\":{\"agent_id\":\"$genie\",\"name\":\"Bench {n}\",\"email\":\"bench{n}@example.test\",\"status\":\"new\",\"priority\":\"medium\"}}" >/dev/null 2>"$OUT/slow.$round.$name.$c.$k"
    after=$(cpu_ticks "$pid")
    python3 - "$OUT/run.json" "$round" "$c" "$before" "$after" "$TICK" >>"$TSV" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
rnd, c, before, after, tick = sys.argv[2:]
n = max(r["requests"], 1)
# The server's CPU over the run includes the warm-up's; per create over the measured ones.
cpu = 1e6 * (int(after) - int(before)) / int(tick) / n
print(f"{rnd}\t{r['name']}\t{c}\t{r['rps']:.0f}\t{r['p50_ms']}\t{r['p99_ms']}\t{r['max_ms']}\t{cpu:.0f}\t{r['errors']}")
PY
    tail -1 "$TSV" >&2
  done
  stop "$pid"
  rm -rf "$d"
}

for round in $(seq "$ROUNDS"); do
  say "round $round of $ROUNDS"
  if (( round % 2 )); then order=("${NAMES[@]}"); else order=(); for ((i = ${#NAMES[@]} - 1; i >= 0; i--)); do order+=("${NAMES[i]}"); done; fi
  for name in "${order[@]}"; do one "$round" "$name"; done
done

python3 - "$TSV" "${NAMES[@]}" <<'PY'
import csv, statistics, sys
rows = list(csv.DictReader(open(sys.argv[1]), delimiter="\t"))
print("| configuration | connections | runs | creates/s | p99 ms | slowest create ms: median (range) | server CPU µs/create | errors |")
print("|---|---:|---:|---:|---:|---:|---:|---:|")
for name in sys.argv[2:]:
    for c in ("1", "64"):
        rs = [r for r in rows if r["name"] == name and r["concurrency"] == c]
        if not rs:
            continue
        med = lambda k: statistics.median(float(r[k]) for r in rs)
        mx = [float(r["max_ms"]) for r in rs]
        print(f"| {name} | {c} | {len(rs)} | {med('rps'):,.0f} | {med('p99_ms'):.2f} | "
              f"{med('max_ms'):.1f} ({min(mx):.1f}–{max(mx):.1f}) | {med('cpu_us'):.0f} | "
              f"{sum(int(r['errors']) for r in rs)} |")
PY
echo "$(nproc) CPUs, load average $(cut -d' ' -f1-3 /proc/loadavg) at the end; raw results in $OUT" >&2
