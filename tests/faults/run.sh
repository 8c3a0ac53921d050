#!/usr/bin/env bash
# The fault suite's cluster-level arms (tests/faults/faults.py) on a throwaway cluster:
#
#   bash tests/faults/run.sh            CI counts (a few minutes)
#   bash tests/faults/run.sh --full     the full counts (figures in tests/RESULTS.md)
#   bash tests/faults/run.sh --arms endpoint,cancel
#
# Needs the extension installed (`cargo pgrx install --package grid_pg`, which
# scripts/test.sh's pgrx step does) and the reference endpoint built (it serves the
# built-in vocabulary document the fake endpoints hand out). psycopg comes from PyPI into
# a virtualenv ($GRID_FAULTS_VENV, default /tmp/grid-faults-venv).
set -euo pipefail
# shellcheck source=scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../../scripts/lib.sh"
# shellcheck source=scripts/cluster.sh
source "$GRID_ROOT/scripts/cluster.sh"
cd "$GRID_ROOT"

venv=${GRID_FAULTS_VENV:-/tmp/grid-faults-venv}
ensure_py_venv "$venv"
run_logged "cargo build -p grid-endpoint" cargo build -p grid-endpoint
# The forbidden-output check the security arm calls (built by the engine tests already).
run_logged "cargo build --profile ci -p grid-cli" cargo build --profile ci -p grid-cli
grid_bin="${CARGO_TARGET_DIR:-$GRID_ROOT/target}/ci/grid"

dir=$(mktemp -d /tmp/grid-faults.XXXXXX)
port=${GRID_FAULTS_PORT:-54410}
endpoint_pid=
# The fake endpoints faults.py starts write their pids here; whatever is left of them
# when this script ends is ended by pid (never by name: other runs share the machine).
export GRID_FAULTS_PIDS="$dir/children.pids"
: >"$GRID_FAULTS_PIDS"
cleanup() {
    [ -n "$endpoint_pid" ] && kill "$endpoint_pid" 2>/dev/null || true
    while read -r pid; do
        kill "$pid" 2>/dev/null || true
    done <"$GRID_FAULTS_PIDS"
    cluster_stop "$dir"
}
trap cleanup EXIT
cluster_start "$dir" "$port" faults
# The vocabulary document the fakes serve: the built-in one, as the reference endpoint
# serves it.
target/debug/grid-endpoint serve --backend mock --mock adversarial --tokenizer builtin \
    --listen "127.0.0.1:${GRID_FAULTS_ENDPOINT_PORT:-18297}" >"$dir/endpoint.log" 2>&1 &
endpoint_pid=$!
for _ in $(seq 50); do
    curl -fsS "http://127.0.0.1:${GRID_FAULTS_ENDPOINT_PORT:-18297}/v1/vocabulary" >"$dir/vocab.json" 2>/dev/null && break
    sleep 0.2
done
kill "$endpoint_pid" 2>/dev/null || true
endpoint_pid=
chmod 755 "$dir"
"$venv/bin/python" tests/faults/faults.py --host "$dir" --port "$port" --db faults \
    --grid "$grid_bin" "$@"
