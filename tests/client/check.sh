#!/usr/bin/env bash
# The OpenAPI document is good enough for a typed client: generate a Python client from the
# document the real binary serves (openapi-python-client, pinned, in a venv kept under the
# target directory) and drive that binary with it (check.py beside this script).
#
#   tests/client/check.sh [path/to/genied]     (default: $CARGO_TARGET_DIR/debug/genied)
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
target="${CARGO_TARGET_DIR:-$here/../../target}"
bin="${1:-$target/debug/genied}"
# Pinned: a new generator release must not turn CI red on its own.
generator="openapi-python-client==0.29.1"
venv="$target/openapi-client-venv"

work="$(mktemp -d)"
pid=""
cleanup() {
    if [ -n "$pid" ]; then
        kill -9 "$pid" 2>/dev/null || true
        wait "$pid" 2>/dev/null || true
    fi
    rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 1' INT TERM

[ -x "$bin" ] || { echo "check.sh: no binary at $bin (run cargo build first)" >&2; exit 1; }
if ! "$venv/bin/python" -c 'import openapi_python_client' 2>/dev/null \
    || [ "$("$venv/bin/pip" show openapi-python-client 2>/dev/null | sed -n 's/^Version: //p')" != "${generator#*==}" ]; then
    rm -rf "$venv"
    python3 -m venv "$venv"
    "$venv/bin/pip" install --quiet --disable-pip-version-check "$generator"
fi

# A port the kernel picks; the server logs the address it bound.
"$bin" --data-dir "$work/data" serve --listen 127.0.0.1:0 >"$work/server.log" 2>&1 &
pid=$!
addr=""
for _ in $(seq 600); do
    addr="$(sed -n 's/.*listening addr=\([0-9.:]*\).*/\1/p' "$work/server.log" | head -n 1)"
    [ -n "$addr" ] && break
    kill -0 "$pid" 2>/dev/null || { cat "$work/server.log" >&2; exit 1; }
    sleep 0.1
done
[ -n "$addr" ] || { echo "check.sh: server did not start in 60 s" >&2; cat "$work/server.log" >&2; exit 1; }
base="http://$addr"

"$bin" --data-dir "$work/data" admin create-user --email client@example.test --password 'typed-Pw-7qK2vX9m-check' >/dev/null
token="$("$bin" --data-dir "$work/data" admin issue-token --email client@example.test)"

"$venv/bin/python" - "$base/v1/openapi.json" "$work/openapi.json" <<'PY'
import sys, urllib.request
with urllib.request.urlopen(sys.argv[1], timeout=60) as r, open(sys.argv[2], "wb") as f:
    f.write(r.read())
PY
printf 'post_hooks: []\n' >"$work/generator.yml"
# --fail-on-warning: a schema the generator has to skip is a defect of the document.
"$venv/bin/openapi-python-client" generate --path "$work/openapi.json" --meta none \
    --config "$work/generator.yml" --output-path "$work/genied_client" --fail-on-warning
PYTHONPATH="$work" "$venv/bin/python" "$here/check.py" "$base" "$token"
echo "client check: ok"
