# Helpers shared by the benchmark scripts that start servers of their own (scale.sh,
# account_delete.sh); sourced, not run.

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
