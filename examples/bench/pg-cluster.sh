#!/usr/bin/env bash
# A throwaway PostgreSQL cluster, as the test harness makes one (tests/it/common/postgres.rs):
# Debian's `postgresql` package (installed with apt-get when missing), an unprivileged
# cluster in a directory of its own (run as the `postgres` user when we are root), on a free
# loopback port, trust authentication for the `genied` role. For benchmarks and trying
# `migrate-storage` by hand; never for data you keep (fsync stays on, but nothing else is
# tuned, and `stop` deletes the directory).
#
#   examples/bench/pg-cluster.sh start DIR   # prints the admin URL: postgres://genied@127.0.0.1:PORT/postgres
#   examples/bench/pg-cluster.sh createdb DIR NAME   # prints the new database's URL
#   examples/bench/pg-cluster.sh stop DIR    # stops the server and removes DIR
# When run as root the server runs as `postgres`, which must be able to reach DIR (its parent
# directories traversable, e.g. a directory of its own under /tmp).
set -euo pipefail

bin_dir() {
  local d
  d=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1 || true)
  [[ -n "$d" && -x "$d/initdb" ]] && echo "$d"
}

as_server() { # command...: as `postgres` when we are root (the server refuses root)
  if [[ $(id -u) == 0 ]]; then
    setpriv --reuid=postgres --regid=postgres --init-groups "$@"
  else
    "$@"
  fi
}

cmd=${1:-}; dir=${2:-}
[[ -n "$cmd" && -n "$dir" ]] || { sed -n '2,14p' "$0" >&2; exit 2; }
case $cmd in
  start)
    BIN=$(bin_dir) || {
      echo "installing Debian's postgresql package (apt-get)" >&2
      SUDO=""; [[ $(id -u) == 0 ]] || SUDO=sudo
      $SUDO apt-get -o DPkg::Lock::Timeout=600 update -q >&2
      DEBIAN_FRONTEND=noninteractive $SUDO apt-get -o DPkg::Lock::Timeout=600 install -y -q --no-install-recommends postgresql >&2
      BIN=$(bin_dir)
    }
    mkdir -p "$dir"
    dir=$(cd "$dir" && pwd)
    [[ $(id -u) == 0 ]] && chown postgres:postgres "$dir"
    as_server "$BIN/initdb" -A trust -U genied -E UTF8 --locale=C.UTF-8 -D "$dir/data" >"$dir/initdb.log"
    port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
    as_server "$BIN/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 60 \
      -o "-p $port -c listen_addresses=127.0.0.1 -c unix_socket_directories=$dir -c max_connections=200" start >&2
    echo "$port" >"$dir/port"
    echo "postgres://genied@127.0.0.1:$port/postgres"
    ;;
  createdb)
    name=${3:?createdb DIR NAME}
    port=$(cat "$dir/port")
    psql -q -h 127.0.0.1 -p "$port" -U genied -d postgres -c "CREATE DATABASE \"$name\"" >&2
    echo "postgres://genied@127.0.0.1:$port/$name"
    ;;
  stop)
    BIN=$(bin_dir)
    [[ -d "$dir/data" ]] && as_server "$BIN/pg_ctl" -D "$dir/data" -m immediate -w stop >&2 || true
    rm -rf "$dir"
    ;;
  *) sed -n '2,14p' "$0" >&2; exit 2 ;;
esac
