# Helpers shared by the benchmark scripts that start servers of their own (compare.sh,
# scale.sh, account_delete.sh); sourced, not run.

say() { printf '\n== %s\n' "$*" >&2; }
json() { python3 -c "import json,sys; print(json.load(sys.stdin)$1)"; }
gone() { # exited: no longer there, or a zombie not reaped yet (the init process may be slow)
  [[ "$(awk '{print $3}' "/proc/$1/stat" 2>/dev/null)" =~ ^(Z|X|)$ ]]
}
stop() { # pid: SIGTERM, then SIGKILL after 10 s
  kill -TERM "$1" 2>/dev/null || true
  for _ in $(seq 400); do gone "$1" && return 0; sleep 0.025; done
  kill -KILL "$1" 2>/dev/null || true
}
stop_all() { # every pid in PIDS: SIGTERM to all at once, then SIGKILL to those left after 5 s
  for pid in "${PIDS[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
  for pid in "${PIDS[@]}"; do
    for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.05; done
    kill -KILL "$pid" 2>/dev/null || true
  done
}
rss_kb() { awk -v f="$2:" '$1 == f {print $2}' "/proc/$1/status"; } # pid field (VmRSS, VmHWM, RssAnon)
TICK=$(getconf CLK_TCK)
cpu_ticks() { # pid: user + system CPU ticks so far (empty when there is no such process)
  if [[ -n "${1:-}" && -r /proc/$1/stat ]]; then awk '{print $14 + $15}' "/proc/$1/stat"; fi
}
# settle pid...: waits (up to 30 s) until none of the servers uses more than 5% of a core over
# half a second; empty pids are skipped. After a heavy run PocketBase's garbage collector
# went on for seconds: measured from /proc, it took 1.8 s of CPU during the 6 s of genied's
# next run, on two cores shared by both; a genied that has just been seeded indexes for a
# while.
settle() {
  local before=() after pid busy k
  for _ in $(seq 60); do
    before=(); for pid in "$@"; do before+=("$(cpu_ticks "$pid")"); done
    sleep 0.5
    busy=0 k=0
    for pid in "$@"; do
      after=$(cpu_ticks "$pid")
      [[ -n "$after" && -n "${before[k]}" ]] && (( (after - before[k]) * 40 > TICK )) && busy=1
      k=$((k + 1))
    done
    (( busy )) || return 0
  done
  echo "    (a server was still busy after 30 s; measuring anyway)" >&2
}
