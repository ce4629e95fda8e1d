#!/usr/bin/env bash
# The scale mode of the benchmark (`SCALE=1 examples/bench/compare.sh` runs this): genied's
# reads at 100,000 and at 1,000,000 leads, with the data of one user or spread over 100 users.
#
#   examples/bench/scale.sh
#   SCALE_LEADS="1000000" SCALE_USERS="1" DURATION=5 SKIP_BUILD=1 examples/bench/scale.sh
#   ROUNDS=3 examples/bench/scale.sh      # each scenario three times: medians and ranges
#
# For each user count U (SCALE_USERS, default "1 100") and size N (SCALE_LEADS, default
# "100000 1000000"), on a data directory of its own: N leads, N/10 conversations, N/100
# genies and N/100 documents of text chained from the project's guides (three chunks each,
# full-text indexed; each with its original and extracted text in the file store, two
# files, as the service keeps a typed text), shared out round robin between U users, seeded
# through genied's db layer (examples/bench scale-seed), and a server of its own on it (port
# GENIED_PORT, the next size on the next port), started right after its seed and left running.
# Then, as the first user (who has N/U leads), one client at a time (examples/loadgen,
# concurrency 1, so the mean latency is 1/rate): lead get, lead `all` by status (page 50),
# the same page deep by offset (N/U/8) and by cursor (at the same depth), lead `stats`,
# genies `all` (page 50), documents `search` (two words rarely found together, and two
# often), conversations `all` (page 50). Each scenario runs against every size in turn,
# seconds apart, in SCALE_LEADS's order in odd rounds and the other way in even ones, each
# run once no server uses CPU: a VM's speed drifts over the minutes a run takes (round
# thirty's one-user ratios followed the order of the sizes, docs/performance.md), and in turn
# the drift falls on both sides of a ratio. Also per size: idle RSS (once the server has no
# child and its CPU time stopped growing after its start), peak RSS of that start and, on
# SQLite, of the process that built the documents' search index in it (from the server's
# log), and apart from them, under the reads and then 64 clients getting leads,
# exec-to-ready (the first start after the seed, with the share of the binary the page cache
# held before it, and the median of RESTARTS, default 5, starts after it, the sizes in turn),
# `admin backup` time, database size. Then one client's lead creates, updates and deletes
# (DELETES, default 200, a round, each of a lead of its own) and genie deletes
# (GENIE_DELETES, default 5, each with its 100 leads), the sizes in turn as well: a write
# must not grow with the data either (a delete's foreign key once read every lead,
# docs/storage.md). With ROUNDS=N all of it N times over (a single 5 s sample on a shared VM
# can be a third off the next): the tables have each scenario's median and range, and the
# median and range of the rounds' ratios, largest size to smallest.
# Raw results stay in $OUT. Every process it starts is stopped on exit.
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

cached_share() { # file: the share of it in the page cache (util-linux's fincore), or null
  local cached
  cached=$(fincore --bytes --noheadings --output RES "$1" 2>/dev/null) || { echo null; return; }
  python3 -c "import sys; print(round(int(sys.argv[1]) / int(sys.argv[2]), 3))" "$cached" "$(stat -c %s "$1")"
}
wait_idle() { # pid: until the server has no child (a first start builds the documents index in
  # one) and its CPU time stops growing (start-up work done), at most 120 s
  local last now
  last=$(cpu_ticks "$1")
  for _ in $(seq 120); do
    sleep 1
    now=$(cpu_ticks "$1")
    [[ -z "$(pgrep -P "$1")" ]] && (( now - last <= 1 )) && return 0
    last=$now
  done
}
build_peak_kb() { # log: the index build process's peak RSS from the server's log line, or null
  local kb
  kb=$(grep -o 'built in a process of its own.*peak_rss_kb=[0-9]*' "$1" | grep -o '[0-9]*$' | tail -1)
  echo "${kb:-null}"
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

start_genied() { # data-dir log-name url
  "$BENCH" start --ready-url "$3/readyz" --log "$WORK/genied-$2.log" -- \
    "$GENIED" --data-dir "$1" serve --listen "${3#http://}" \
    --rate-limit-per-minute 0 --session-rate-limit-per-minute 0
}

# Each size's server, keyed by its tag (n<leads>.u<users>).
declare -A LEADS_OF PID_OF URL_OF DIR_OF TOKEN_OF SETUP_OF SEARCH_OF COMMON_OF SEED_S READY_OF CACHED_OF IDLE_OF ANON_OF START_PEAK_OF BUILD_PEAK_OF MINE_OF DEEP_OF CURSOR_OF
run() { # name tag body [loadgen args]: one round's run of a scenario against one size's server
  settle "${PID_OF[@]}"
  "$LOADGEN" --name "$1" --concurrency 1 --duration-secs "$DURATION" --warmup-secs "${WARM:-$WARMUP}" \
    --out "$OUT/$1.$2.r$round.json" --header "authorization: Bearer ${TOKEN_OF[$2]}" \
    --url "${URL_OF[$2]}/v1" --method POST --body "$3" "${@:4}" >/dev/null
}
in_turn() { # round: the sizes' tags, in SCALE_LEADS's order in odd rounds, reversed in even ones
  if (( $1 % 2 )); then printf '%s\n' "${TAGS[@]}"; else printf '%s\n' "${TAGS[@]}" | tac; fi
}

for users in $SCALE_USERS; do
  PID_OF=(); TAGS=()
  # Every size is seeded, then started and left running while the next one seeds: the
  # scenarios below then alternate between the sizes' servers, a few seconds apart, so the
  # VM's drift over the minutes of a run (docs/performance.md, round thirty) falls on both.
  i=0
  for leads in $SCALE_LEADS; do
    tag="n$leads.u$users"; TAGS+=("$tag"); LEADS_OF[$tag]=$leads
    say "$leads leads, $((leads / 10)) conversations, $((leads / 100)) genies, $((leads / 100)) documents; $users user(s)"
    D=$WORK/data/$tag; DIR_OF[$tag]=$D; rm -rf "$D"; mkdir -p "$WORK/data"
    URL_OF[$tag]=http://127.0.0.1:$((PORT + i)); i=$((i + 1))
    S=$(start_genied "$D" "$tag-first" "${URL_OF[$tag]}"); PID=$(json "['pid']" <<<"$S"); PIDS+=("$PID")
    "$GENIED" --data-dir "$D" --log-level warn admin create-user --email "$EMAIL" --password "$PASSWORD" >/dev/null
    SETUP_OF[$tag]=$("$BENCH" genied-setup --url "${URL_OF[$tag]}" --email "$EMAIL" --password "$PASSWORD")
    TOKEN_OF[$tag]=$(json "['token']" <<<"${SETUP_OF[$tag]}")
    stop "$PID"
    t0=$(date +%s.%N)
    SEED=$("$BENCH" scale-seed --data-dir "$D" --email "$EMAIL" --users "$users" --leads "$leads" \
      --conversations $((leads / 10)) --genies $((leads / 100)) --documents $((leads / 100)) \
      --ids-out "$WORK/ids.$tag")
    SEED_S[$tag]=$(python3 -c "import time,sys; print(f'{time.time() - float(sys.argv[1]):.1f}')" "$t0")
    SEARCH_OF[$tag]=$(json "['search']" <<<"$SEED")
    COMMON_OF[$tag]=$(json "['search_common']" <<<"$SEED")
    # How much of the executable the page cache still held: a kernel that pages out what no
    # one touched for a while (this VM's does after about a minute) makes the first start
    # read the binary back (docs/performance.md, round twenty-eight).
    CACHED_OF[$tag]=$(cached_share "$GENIED")
    S=$(start_genied "$D" "$tag" "${URL_OF[$tag]}"); PID=$(json "['pid']" <<<"$S"); PIDS+=("$PID")
    PID_OF[$tag]=$PID
    READY_OF[$tag]=$(json "['ready_ms']" <<<"$S")
    # Anything a start leaves running in the background is done before measuring: the
    # figures are of the server at rest.
    wait_idle "$PID"
    IDLE_OF[$tag]=$(rss_kb "$PID" VmRSS)
    # The anonymous part is the server's own memory; the rest is mostly the executable's
    # pages, which count for more when the binary was just written (docs/performance.md).
    ANON_OF[$tag]=$(rss_kb "$PID" RssAnon)
    # The start's own high-water mark (on SQLite a first start builds the documents' search
    # index), then the kernel's mark reset (clear_refs 5) so the peak under load below is
    # the load's alone.
    START_PEAK_OF[$tag]=$(rss_kb "$PID" VmHWM)
    echo 5 >"/proc/$PID/clear_refs"
    # The index's build runs in a process of its own, which says its peak when done.
    BUILD_PEAK_OF[$tag]=$(build_peak_kb "$WORK/genied-$tag.log")
    mine=$(wc -l <"$WORK/ids.$tag"); MINE_OF[$tag]=$mine
    deep=$(( mine / 4 / 8 / 50 * 50 )) # a status has a quarter of the leads; N/U/8 of them deep
    DEEP_OF[$tag]=$deep
    CURSOR_OF[$tag]=$(curl -sf "${URL_OF[$tag]}/v1" -H "authorization: Bearer ${TOKEN_OF[$tag]}" -H 'content-type: application/json' \
      -d "{\"resource\":\"leads\",\"action\":\"all\",\"data\":{\"filters\":{\"status\":\"qualified\"},\"limit\":50,\"offset\":$(( deep > 50 ? deep - 50 : 0 ))}}" \
      | json "['data']['nextCursor']")
  done

  say "reads, $users user(s): ${TAGS[*]} in turn, $ROUNDS round(s)"
  for round in $(seq "$ROUNDS"); do
    order=$(in_turn "$round")
    for t in $order; do run get "$t" '{"resource":"leads","action":"get","id":{id}}' --ids "$WORK/ids.$t"; done
    for t in $order; do run list "$t" '{"resource":"leads","action":"all","data":{"filters":{"status":"qualified"},"limit":50}}'; done
    for t in $order; do run offset "$t" "{\"resource\":\"leads\",\"action\":\"all\",\"data\":{\"filters\":{\"status\":\"qualified\"},\"limit\":50,\"offset\":${DEEP_OF[$t]}}}"; done
    for t in $order; do run cursor "$t" "{\"resource\":\"leads\",\"action\":\"all\",\"data\":{\"filters\":{\"status\":\"qualified\"},\"limit\":50,\"cursor\":\"${CURSOR_OF[$t]}\"}}"; done
    for t in $order; do run stats "$t" '{"resource":"leads","action":"stats"}'; done
    for t in $order; do run genies "$t" '{"resource":"genies","action":"all","data":{"limit":50}}'; done
    for t in $order; do run search "$t" "{\"resource\":\"documents\",\"action\":\"search\",\"data\":{\"query\":\"${SEARCH_OF[$t]}\"}}"; done
    for t in $order; do run search_common "$t" "{\"resource\":\"documents\",\"action\":\"search\",\"data\":{\"query\":\"${COMMON_OF[$t]}\"}}"; done
    for t in $order; do run conversations "$t" '{"resource":"conversations","action":"all","data":{"limit":50}}'; done
  done
  declare -A PEAK_OF BACKUP_OF
  for t in "${TAGS[@]}"; do
    settle "${PID_OF[@]}"
    "$LOADGEN" --name peak --concurrency 64 --duration-secs "$DURATION" --warmup-secs 0 \
      --header "authorization: Bearer ${TOKEN_OF[$t]}" --url "${URL_OF[$t]}/v1" --method POST \
      --ids "$WORK/ids.$t" --out "$OUT/peak.$t.json" \
      --body '{"resource":"leads","action":"get","id":{id}}' >/dev/null
    PEAK_OF[$t]=$(rss_kb "${PID_OF[$t]}" VmHWM)
    rm -f "$WORK/backup.db"
    t0=$(date +%s.%N)
    if "${BACKUP_BIN:-$GENIED}" --data-dir "${DIR_OF[$t]}" --log-level warn admin backup --out "$WORK/backup.db" >/dev/null; then
      BACKUP_OF[$t]=$(python3 -c "import time,sys; print(f'{time.time() - float(sys.argv[1]):.2f}')" "$t0")
    else
      BACKUP_OF[$t]=null
    fi
  done
  rm -f "$WORK/backup.db"

  # Writes, after the reads and the backups (deletes change what the reads would see): one
  # client's lead creates, updates and deletes, and genie deletes, the sizes in turn as the
  # reads were. Each round deletes DELETES leads of its own, from the end of the user's list
  # (the updates go to the leads no round deletes), and GENIE_DELETES of the user's seeded
  # genies, with their leads.
  say "writes, $users user(s)"
  declare -A GENIE_OF PER_OF
  for t in "${TAGS[@]}"; do
    GENIE_OF[$t]=$(json "['genie_id']" <<<"${SETUP_OF[$t]}")
    tac "$WORK/ids.$t" >"$WORK/ids-from-end.$t"
    head -n $(( MINE_OF[$t] - ROUNDS * DELETES )) "$WORK/ids.$t" >"$WORK/update-ids.$t"
    curl -sf "${URL_OF[$t]}/v1" -H "authorization: Bearer ${TOKEN_OF[$t]}" -H 'content-type: application/json' \
      -d '{"resource":"genies","action":"all","data":{"limit":500}}' \
      | python3 -c "import json, sys
print('\n'.join(g['id'] for g in json.load(sys.stdin)['data']['genies'] if g['id'] != sys.argv[1]))" "${GENIE_OF[$t]}" \
      >"$WORK/genie-ids.$t"
    # A user among 100 at 100,000 leads has 10 genies: each round takes its share when there
    # are fewer than GENIE_DELETES for every round.
    per=$(( $(wc -l <"$WORK/genie-ids.$t") / ROUNDS ))
    (( per > GENIE_DELETES )) && per=$GENIE_DELETES
    PER_OF[$t]=$per
  done
  for round in $(seq "$ROUNDS"); do
    order=$(in_turn "$round")
    for t in $order; do
      run create "$t" "{\"resource\":\"leads\",\"action\":\"create\",\"data\":{\"agent_id\":\"${GENIE_OF[$t]}\",\"name\":\"Bench {n}\",\"email\":\"bench{n}@example.test\",\"status\":\"new\",\"priority\":\"medium\"}}" \
        --expect-status 201
    done
    for t in $order; do
      run update "$t" '{"resource":"leads","action":"update","id":{id},"data":{"status":"contacted"}}' --ids "$WORK/update-ids.$t"
    done
    for t in $order; do
      sed -n "$(( (round - 1) * DELETES + 1 )),$(( round * DELETES ))p" "$WORK/ids-from-end.$t" >"$WORK/delete-ids"
      WARM=0 run delete "$t" '{"resource":"leads","action":"delete","id":{id}}' --ids "$WORK/delete-ids" \
        --requests "$DELETES"
    done
  done
  # Last, as they delete leads all through the user's list.
  for round in $(seq "$ROUNDS"); do
    for t in $(in_turn "$round"); do
      per=${PER_OF[$t]}
      (( per > 0 )) || continue
      sed -n "$(( (round - 1) * per + 1 )),$(( round * per ))p" "$WORK/genie-ids.$t" >"$WORK/delete-genie-ids"
      WARM=0 run genie_delete "$t" '{"resource":"genies","action":"delete","id":"{id}"}' --ids "$WORK/delete-genie-ids" \
        --requests "$per"
    done
  done
  for t in "${TAGS[@]}"; do stop "${PID_OF[$t]}"; done
  PID_OF=()
  # The first start's exec-to-ready is one sample, taken after the seed's minutes of work;
  # on a VM a start after a busy or idle spell can take twice as long as one right after
  # another (docs/performance.md). So RESTARTS more starts of each size, in turn.
  declare -A LATER_OF
  for t in "${TAGS[@]}"; do LATER_OF[$t]=""; done
  for i in $(seq "${RESTARTS:-5}"); do
    for t in $(in_turn "$i"); do
      S=$(start_genied "${DIR_OF[$t]}" "$t-restart$i" "${URL_OF[$t]}"); PID=$(json "['pid']" <<<"$S"); PIDS+=("$PID")
      LATER_OF[$t]+="${LATER_OF[$t]:+,}$(json "['ready_ms']" <<<"$S")"
      stop "$PID"
    done
  done
  for t in "${TAGS[@]}"; do
    cat >"$OUT/footprint.$t.json" <<EOF
{"leads": ${LEADS_OF[$t]}, "users": $users, "leads_of_user": ${MINE_OF[$t]}, "deep_offset": ${DEEP_OF[$t]}, "idle_rss_kb": ${IDLE_OF[$t]}, "idle_anon_kb": ${ANON_OF[$t]},
 "start_peak_rss_kb": ${START_PEAK_OF[$t]}, "build_peak_rss_kb": ${BUILD_PEAK_OF[$t]}, "peak_rss_kb": ${PEAK_OF[$t]}, "ready_ms": ${READY_OF[$t]}, "binary_cached": ${CACHED_OF[$t]}, "ready_later_ms": [${LATER_OF[$t]}], "backup_s": ${BACKUP_OF[$t]},
 "seed_s": ${SEED_S[$t]}, "db_bytes": $(stat -c %s "${DIR_OF[$t]}/genied.db")}
EOF
  done
  [[ "${KEEP:-0}" == 1 ]] || rm -rf "$WORK/data"
done

python3 - "$OUT" "$SCALE_LEADS" "$SCALE_USERS" "$LOAD_START" "$(cut -d' ' -f1-3 /proc/loadavg)" "$DURATION" "$ROUNDS" <<'EOF'
import json, os, statistics, sys
out, sizes, users, load0, load1, dur = sys.argv[1], sys.argv[2].split(), sys.argv[3].split(), sys.argv[4], sys.argv[5], sys.argv[6]
rounds = int(sys.argv[7])
backup = lambda f: "–" if f["backup_s"] is None else f"{f['backup_s']} s"
names = ["get", "list", "offset", "cursor", "stats", "genies", "search", "search_common", "conversations"]
heads = "| lead get | all 50 by status | deep by offset | deep by cursor | stats | genies all 50 | documents search: rare words | common words | conversations all 50 |"
def latencies(tag, s):
    """The mean latency of each round in µs (1 / rate at concurrency 1; None for a round
    with no answer), and the errors."""
    v, errors = [], 0
    for i in range(1, rounds + 1):
        path = os.path.join(out, f"{s}.{tag}.r{i}.json")
        if not os.path.exists(path): # a round with nothing to do (no genie left to delete)
            v.append(None)
            continue
        r = json.load(open(path))
        errors += r["errors"]
        v.append(1e6 / r["rps"] if r["rps"] else None)
    return v, errors
def table(title, names, heads):
    print()
    print(title + ", one client (examples/loadgen, concurrency 1)"
          + (f"; the median of {rounds} rounds, their range below it:" if rounds > 1 else ":"))
    print()
    print("| leads | users | user's leads " + heads)
    print("|---:|---:|---:|" + "---:|" * len(names))
    per_round = {}
    for u in users:
        for n in sizes:
            tag = f"n{n}.u{u}"
            f = json.load(open(os.path.join(out, f"footprint.{tag}.json")))
            cells = []
            for s in names:
                rv, errors = latencies(tag, s)
                per_round[(n, u, s)] = rv
                v = [x for x in rv if x is not None]
                err = f" ({errors} errors)" if errors else ""
                if not v:
                    cells.append("–" + err)
                    continue
                m = statistics.median(v)
                spread = f"<br>{min(v):.0f}–{max(v):.0f}" if len(v) > 1 else ""
                cells.append(f"{m:.0f} µs{spread}{err}")
            print(f"| {int(n):,} | {u} | {f['leads_of_user']:,} (deep: offset {f['deep_offset']:,}) | " + " | ".join(cells) + " |")
    if len(sizes) > 1:
        small, large = sizes[0], sizes[-1]
        print()
        # The sizes ran in turn, a few seconds apart, in every round: each round's ratio is
        # of two runs under the same conditions, and the table has their median.
        print(f"{int(large):,} leads against {int(small):,}"
              + (f" (the median of the {rounds} rounds' ratios, their range below it):" if rounds > 1 else ":"))
        print()
        print("| users " + heads)
        print("|---:|" + "---:|" * len(names))
        for u in users:
            cells = []
            for s in names:
                pairs = zip(per_round.get((small, u, s), []), per_round.get((large, u, s), []))
                r = [b / a for a, b in pairs if a and b]
                if not r:
                    cells.append("–")
                    continue
                spread = f"<br>{min(r):.2f}–{max(r):.2f}" if len(r) > 1 else ""
                cells.append(f"{statistics.median(r):.2f}×{spread}")
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
def start_peak(f):
    if "start_peak_rss_kb" not in f:
        return "–"
    build = f.get("build_peak_rss_kb")
    return f"{f['start_peak_rss_kb'] / 1024:.1f} MB" + (f"<br>index build: {build / 1024:.1f} MB" if build else "")
print("| leads | users | idle RSS | of it anonymous | peak RSS: first start after the seed (the server; the index build's process) | under load (the reads, then 64 clients) | exec to ready: first start after the seed | median of the starts after it | admin backup | database file (all tables) | seeding |")
print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
for u in users:
    for n in sizes:
        f = json.load(open(os.path.join(out, f"footprint.n{n}.u{u}.json")))
        print(f"| {int(n):,} | {u} | {f['idle_rss_kb'] / 1024:.1f} MB | {anon(f)} | {start_peak(f)} | {f['peak_rss_kb'] / 1024:.1f} MB | {f['ready_ms']:.0f} ms{cached(f)} | {later(f)} | "
              f"{backup(f)} | {f['db_bytes'] / 1e6:.0f} MB | {f['seed_s']} s |")
print(f"\n{os.cpu_count()} CPUs, load average {load0} at start, {load1} at end; {dur} s per run; raw results in {out}")
EOF
