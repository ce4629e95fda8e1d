#!/usr/bin/env bash
# The scale mode of the benchmark (`SCALE=1 examples/bench/compare.sh` runs this): genied's
# reads at 100,000 and at 1,000,000 leads, with the data of one user or spread over 100 users.
#
#   examples/bench/scale.sh
#   SCALE_LEADS="1000000" SCALE_USERS="1" DURATION=5 SKIP_BUILD=1 examples/bench/scale.sh
#   ROUNDS=3 examples/bench/scale.sh      # each scenario three times: medians and ranges
#
# For each size N (SCALE_LEADS, default "100000 1000000") and user count U (SCALE_USERS,
# default "1 100"), on a fresh data directory: N leads, N/10 conversations, N/100 genies and
# N/100 documents of text chained from the project's guides (three chunks each, full-text
# indexed; each with its original and extracted text in the file store, two files, as the
# service keeps a typed text), shared out round robin between U users, seeded through genied's db layer
# (examples/bench scale-seed). Then, as the first user (who has N/U leads), one client at a
# time (examples/loadgen, concurrency 1, so the mean latency is 1/rate): lead get, lead `all`
# by status (page 50), the same page deep by offset (N/U/8) and by cursor (at the same
# depth), lead `stats`, genies `all` (page 50), documents `search` (two words rarely found
# together, and two often), conversations `all` (page 50), once the server's CPU time has
# stopped growing after the start; idle RSS, peak RSS under 64 clients getting leads,
# exec-to-ready (the first start after the seed, with the share of the binary the page cache
# held before it, and the median of RESTARTS, default 5, starts after it), `admin backup`
# time, database size. Then one client's lead creates, updates and deletes (DELETES, default
# 200, a round, each of a lead of its own) and genie deletes (GENIE_DELETES, default 5, each
# with its 100 leads): a write must not grow with the data either (a delete's
# foreign key once read every lead, docs/storage.md). With ROUNDS=N the scenarios
# run N times over, one after another (a single 5 s sample on a shared VM can be a third
# off the next), and the table has each one's median and range.
# Prints the tables, and the ratio of each latency at the largest size to the smallest;
# raw results stay in $OUT. Every process it starts is stopped on exit.
set -euo pipefail

DURATION=${DURATION:-5}
WARMUP=${WARMUP:-1}
ROUNDS=${ROUNDS:-1}
DELETES=${DELETES:-200}
GENIE_DELETES=${GENIE_DELETES:-5}
SCALE_LEADS=${SCALE_LEADS:-"100000 1000000"}
SCALE_USERS=${SCALE_USERS:-"1 100"}
PORT=${GENIED_PORT:-18080}
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
TARGET=${CARGO_TARGET_DIR:-$ROOT/target}
WORK=$(mktemp -d "${TMPDIR:-/tmp}/genied-scale.XXXXXX")
OUT=${OUT:-$WORK/results}
mkdir -p "$OUT"
PIDS=()
LOAD_START=$(cut -d' ' -f1-3 /proc/loadavg)

# shellcheck source=examples/bench/common.sh
. "$ROOT/examples/bench/common.sh"

cleanup() {
  stop_all
  [[ "${KEEP:-0}" == 1 ]] || rm -rf "$WORK/data"
  rm -f "$WORK/backup.db"
}
trap cleanup EXIT INT TERM

rss_kb() { awk -v f="$2:" '$1 == f {print $2}' "/proc/$1/status"; }
cached_share() { # file: the share of it in the page cache (util-linux's fincore), or null
  local cached
  cached=$(fincore --bytes --noheadings --output RES "$1" 2>/dev/null) || { echo null; return; }
  python3 -c "import sys; print(round(int(sys.argv[1]) / int(sys.argv[2]), 3))" "$cached" "$(stat -c %s "$1")"
}
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
wait_idle() { # pid: until the server's CPU time stops growing (start-up work done), at most 120 s
  local last now
  last=$(cpu_ticks "$1")
  for _ in $(seq 120); do
    sleep 1
    now=$(cpu_ticks "$1")
    (( now - last <= 1 )) && return 0
    last=$now
  done
}

if [[ "${SKIP_BUILD:-0}" != 1 ]]; then
  say "building genied (release)"
  (cd "$ROOT" && cargo build --release --bin genied --example bench --example loadgen)
fi
GENIED=$TARGET/release/genied
BENCH=$TARGET/release/examples/bench
LOADGEN=$TARGET/release/examples/loadgen
EMAIL=bench@example.test
PASSWORD=Vq7t-k3Lw-pass-9xRz-perf
G=http://127.0.0.1:$PORT

start_genied() { # data-dir log-name
  "$BENCH" start --ready-url "$G/readyz" --log "$WORK/genied-$2.log" -- \
    "$GENIED" --data-dir "$1" serve --listen "127.0.0.1:$PORT" \
    --rate-limit-per-minute 0 --session-rate-limit-per-minute 0
}

for users in $SCALE_USERS; do
  for leads in $SCALE_LEADS; do
    tag="n$leads.u$users"
    say "$leads leads, $((leads / 10)) conversations, $((leads / 100)) genies, $((leads / 100)) documents; $users user(s)"
    D=$WORK/data; rm -rf "$D"
    S=$(start_genied "$D" "$tag-first"); PID=$(json "['pid']" <<<"$S"); PIDS+=("$PID")
    "$GENIED" --data-dir "$D" --log-level warn admin create-user --email "$EMAIL" --password "$PASSWORD" >/dev/null
    SETUP=$("$BENCH" genied-setup --url "$G" --email "$EMAIL" --password "$PASSWORD")
    TOKEN=$(json "['token']" <<<"$SETUP")
    stop "$PID"
    t0=$(date +%s.%N)
    SEED=$("$BENCH" scale-seed --data-dir "$D" --email "$EMAIL" --users "$users" --leads "$leads" \
      --conversations $((leads / 10)) --genies $((leads / 100)) --documents $((leads / 100)) \
      --ids-out "$WORK/ids")
    seed_s=$(python3 -c "import time,sys; print(f'{time.time() - float(sys.argv[1]):.1f}')" "$t0")
    SEARCH=$(json "['search']" <<<"$SEED")
    SEARCH_COMMON=$(json "['search_common']" <<<"$SEED")
    # How much of the executable the page cache still held: a kernel that pages out what no
    # one touched for a while (this VM's does after about a minute) makes the first start
    # read the binary back (docs/performance.md, round twenty-eight).
    BIN_CACHED=$(cached_share "$GENIED")
    S=$(start_genied "$D" "$tag"); PID=$(json "['pid']" <<<"$S"); PIDS+=("$PID")
    READY=$(json "['ready_ms']" <<<"$S")
    # Anything a start leaves running in the background is done before measuring: the
    # figures are of the server at rest.
    wait_idle "$PID"
    IDLE=$(rss_kb "$PID" VmRSS)
    # The anonymous part is the server's own memory; the rest is mostly the executable's
    # pages, which count for more when the binary was just written (docs/performance.md).
    IDLE_ANON=$(rss_kb "$PID" RssAnon)
    mine=$(wc -l <"$WORK/ids")
    deep=$(( mine / 4 / 8 / 50 * 50 )) # a status has a quarter of the leads; N/U/8 of them deep
    AUTH=(--header "authorization: Bearer $TOKEN")
    CURSOR=$(curl -sf "$G/v1" -H "authorization: Bearer $TOKEN" -H 'content-type: application/json' \
      -d "{\"resource\":\"leads\",\"action\":\"all\",\"data\":{\"filters\":{\"status\":\"qualified\"},\"limit\":50,\"offset\":$(( deep > 50 ? deep - 50 : 0 ))}}" \
      | json "['data']['nextCursor']")
    run() { # name body [loadgen args]: one round's run of a scenario
      "$LOADGEN" --name "$1" --concurrency 1 --duration-secs "$DURATION" --warmup-secs "$WARMUP" \
        --out "$OUT/$1.$tag.r$round.json" "${AUTH[@]}" --url "$G/v1" --method POST --body "$2" "${@:3}" >/dev/null
    }
    for round in $(seq "$ROUNDS"); do
      run get '{"resource":"leads","action":"get","id":{id}}' --ids "$WORK/ids"
      run list '{"resource":"leads","action":"all","data":{"filters":{"status":"qualified"},"limit":50}}'
      run offset "{\"resource\":\"leads\",\"action\":\"all\",\"data\":{\"filters\":{\"status\":\"qualified\"},\"limit\":50,\"offset\":$deep}}"
      run cursor "{\"resource\":\"leads\",\"action\":\"all\",\"data\":{\"filters\":{\"status\":\"qualified\"},\"limit\":50,\"cursor\":\"$CURSOR\"}}"
      run stats '{"resource":"leads","action":"stats"}'
      run genies '{"resource":"genies","action":"all","data":{"limit":50}}'
      run search "{\"resource\":\"documents\",\"action\":\"search\",\"data\":{\"query\":\"$SEARCH\"}}"
      run search_common "{\"resource\":\"documents\",\"action\":\"search\",\"data\":{\"query\":\"$SEARCH_COMMON\"}}"
      run conversations '{"resource":"conversations","action":"all","data":{"limit":50}}'
    done
    "$LOADGEN" --name peak --concurrency 64 --duration-secs "$DURATION" --warmup-secs 0 "${AUTH[@]}" \
      --url "$G/v1" --method POST --ids "$WORK/ids" --out "$OUT/peak.$tag.json" \
      --body '{"resource":"leads","action":"get","id":{id}}' >/dev/null
    PEAK=$(rss_kb "$PID" VmHWM)
    rm -f "$WORK/backup.db"
    t0=$(date +%s.%N)
    if "${BACKUP_BIN:-$GENIED}" --data-dir "$D" --log-level warn admin backup --out "$WORK/backup.db" >/dev/null; then
      backup_s=$(python3 -c "import time,sys; print(f'{time.time() - float(sys.argv[1]):.2f}')" "$t0")
    else
      backup_s=null
    fi
    # Writes, after the reads and the backup (deletes change what the reads would see): one
    # client's lead creates, updates and deletes, and genie deletes. Each round deletes
    # DELETES leads of its own, from the end of the user's list (the updates go to the leads
    # no round deletes), and GENIE_DELETES of the user's seeded genies, with their leads.
    GENIE=$(json "['genie_id']" <<<"$SETUP")
    tac "$WORK/ids" >"$WORK/ids-from-end"
    head -n $(( mine - ROUNDS * DELETES )) "$WORK/ids" >"$WORK/update-ids"
    curl -sf "$G/v1" -H "authorization: Bearer $TOKEN" -H 'content-type: application/json' \
      -d '{"resource":"genies","action":"all","data":{"limit":500}}' \
      | python3 -c "import json, sys
print('\n'.join(g['id'] for g in json.load(sys.stdin)['data']['genies'] if g['id'] != sys.argv[1]))" "$GENIE" \
      >"$WORK/genie-ids"
    for round in $(seq "$ROUNDS"); do
      run create "{\"resource\":\"leads\",\"action\":\"create\",\"data\":{\"agent_id\":\"$GENIE\",\"name\":\"Bench {n}\",\"email\":\"bench{n}@example.test\",\"status\":\"new\",\"priority\":\"medium\"}}" \
        --expect-status 201
      run update '{"resource":"leads","action":"update","id":{id},"data":{"status":"contacted"}}' --ids "$WORK/update-ids"
      sed -n "$(( (round - 1) * DELETES + 1 )),$(( round * DELETES ))p" "$WORK/ids-from-end" >"$WORK/delete-ids"
      "$LOADGEN" --name delete --concurrency 1 --duration-secs "$DURATION" --warmup-secs 0 --requests "$DELETES" \
        --out "$OUT/delete.$tag.r$round.json" "${AUTH[@]}" --url "$G/v1" --method POST --ids "$WORK/delete-ids" \
        --body '{"resource":"leads","action":"delete","id":{id}}' >/dev/null
    done
    # Last, as they delete leads all through the user's list. A user among 100 at 100,000
    # leads has 10 genies: each round takes its share when there are fewer than GENIE_DELETES
    # for every round.
    per=$(( $(wc -l <"$WORK/genie-ids") / ROUNDS ))
    (( per > GENIE_DELETES )) && per=$GENIE_DELETES
    for round in $(seq "$ROUNDS"); do
      (( per > 0 )) || break
      sed -n "$(( (round - 1) * per + 1 )),$(( round * per ))p" "$WORK/genie-ids" >"$WORK/delete-genie-ids"
      "$LOADGEN" --name genie_delete --concurrency 1 --duration-secs "$DURATION" --warmup-secs 0 --requests "$per" \
        --out "$OUT/genie_delete.$tag.r$round.json" "${AUTH[@]}" --url "$G/v1" --method POST --ids "$WORK/delete-genie-ids" \
        --body '{"resource":"genies","action":"delete","id":"{id}"}' >/dev/null
    done
    stop "$PID"
    # The first start's exec-to-ready is one sample, taken after the seed's minutes of work;
    # on a VM a start after a busy or idle spell can take twice as long as one right after
    # another (docs/performance.md). So RESTARTS more starts, back to back.
    LATER=()
    for i in $(seq "${RESTARTS:-5}"); do
      S=$(start_genied "$D" "$tag-restart$i"); PID=$(json "['pid']" <<<"$S"); PIDS+=("$PID")
      LATER+=("$(json "['ready_ms']" <<<"$S")")
      stop "$PID"
    done
    LATER_JSON="[$(IFS=,; echo "${LATER[*]}")]"
    DB_BYTES=$(stat -c %s "$D/genied.db")
    cat >"$OUT/footprint.$tag.json" <<EOF
{"leads": $leads, "users": $users, "leads_of_user": $mine, "deep_offset": $deep, "idle_rss_kb": $IDLE, "idle_anon_kb": $IDLE_ANON,
 "peak_rss_kb": $PEAK, "ready_ms": $READY, "binary_cached": $BIN_CACHED, "ready_later_ms": $LATER_JSON, "backup_s": $backup_s,
 "seed_s": $seed_s, "db_bytes": $DB_BYTES}
EOF
  done
done

python3 - "$OUT" "$SCALE_LEADS" "$SCALE_USERS" "$LOAD_START" "$(cut -d' ' -f1-3 /proc/loadavg)" "$DURATION" "$ROUNDS" <<'EOF'
import json, os, statistics, sys
out, sizes, users, load0, load1, dur = sys.argv[1], sys.argv[2].split(), sys.argv[3].split(), sys.argv[4], sys.argv[5], sys.argv[6]
rounds = int(sys.argv[7])
backup = lambda f: "–" if f["backup_s"] is None else f"{f['backup_s']} s"
names = ["get", "list", "offset", "cursor", "stats", "genies", "search", "search_common", "conversations"]
heads = "| lead get | all 50 by status | deep by offset | deep by cursor | stats | genies all 50 | documents search: rare words | common words | conversations all 50 |"
def latencies(tag, s):
    """The mean latency of each round in µs (1 / rate at concurrency 1), and the errors."""
    v, errors = [], 0
    for i in range(1, rounds + 1):
        r = json.load(open(os.path.join(out, f"{s}.{tag}.r{i}.json")))
        errors += r["errors"]
        if r["rps"]:
            v.append(1e6 / r["rps"])
    return v, errors
def table(title, names, heads):
    print()
    print(title + ", one client (examples/loadgen, concurrency 1)"
          + (f"; the median of {rounds} rounds, their range below it:" if rounds > 1 else ":"))
    print()
    print("| leads | users | user's leads " + heads)
    print("|---:|---:|---:|" + "---:|" * len(names))
    median = {}
    for u in users:
        for n in sizes:
            tag = f"n{n}.u{u}"
            f = json.load(open(os.path.join(out, f"footprint.{tag}.json")))
            cells = []
            for s in names:
                v, errors = latencies(tag, s)
                err = f" ({errors} errors)" if errors else ""
                if not v:
                    cells.append("–" + err)
                    continue
                median[(n, u, s)] = statistics.median(v)
                spread = f"<br>{min(v):.0f}–{max(v):.0f}" if len(v) > 1 else ""
                cells.append(f"{median[(n, u, s)]:.0f} µs{spread}{err}")
            print(f"| {int(n):,} | {u} | {f['leads_of_user']:,} (deep: offset {f['deep_offset']:,}) | " + " | ".join(cells) + " |")
    if len(sizes) > 1:
        small, large = sizes[0], sizes[-1]
        print()
        print(f"{int(large):,} leads against {int(small):,} (the medians' ratio):")
        print()
        print("| users " + heads)
        print("|---:|" + "---:|" * len(names))
        for u in users:
            cells = []
            for s in names:
                a, b = median.get((small, u, s)), median.get((large, u, s))
                cells.append(f"{b / a:.2f}×" if a and b else "–")
            print(f"| {u} | " + " | ".join(cells) + " |")
table("Mean latency of reads", names, heads)
table("Mean latency of writes", ["create", "update", "delete", "genie_delete"],
      "| lead create | lead update | lead delete | genie delete (with its leads) |")
print()
def later(f):
    v = sorted(f.get("ready_later_ms") or [])
    return f"{v[len(v) // 2]:.0f} ms" if v else "–"
def anon(f):
    return f"{f['idle_anon_kb'] / 1024:.1f} MB" if "idle_anon_kb" in f else "–"
def cached(f):
    v = f.get("binary_cached")
    return "" if v is None else f" ({v:.0%} of the binary cached)"
print("| leads | users | idle RSS | of it anonymous | peak RSS (64 clients) | exec to ready: first start after the seed | median of the starts after it | admin backup | database file (all tables) | seeding |")
print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
for u in users:
    for n in sizes:
        f = json.load(open(os.path.join(out, f"footprint.n{n}.u{u}.json")))
        print(f"| {int(n):,} | {u} | {f['idle_rss_kb'] / 1024:.1f} MB | {anon(f)} | {f['peak_rss_kb'] / 1024:.1f} MB | {f['ready_ms']:.0f} ms{cached(f)} | {later(f)} | "
              f"{backup(f)} | {f['db_bytes'] / 1e6:.0f} MB | {f['seed_s']} s |")
print(f"\n{os.cpu_count()} CPUs, load average {load0} at start, {load1} at end; {dur} s per run; raw results in {out}")
EOF
