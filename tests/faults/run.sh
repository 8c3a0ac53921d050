#!/usr/bin/env bash
# The fault suite's cluster-level arms (tests/faults/faults.py) on a throwaway cluster:
#
#   bash tests/faults/run.sh            CI counts (a few minutes)
#   bash tests/faults/run.sh --full     the full counts (figures in tests/RESULTS.md)
#   bash tests/faults/run.sh --arms endpoint,cancel
#   bash tests/faults/run.sh --pg 18    on PostgreSQL 18 (the wheel scripts/setup.sh
#                                       installs; the extension installed there, as
#                                       scripts/test.sh's pgrx tests pg18 step does), on
#                                       other default ports than 15's so that both can run
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

# --pg MAJOR is this script's; the other arguments go to faults.py.
pg=15
args=()
while [ $# -gt 0 ]; do
    case "$1" in
        --pg)
            [ $# -ge 2 ] || die "--pg needs a major version (15 or 18)"
            pg=$2
            shift
            ;;
        *) args+=("$1") ;;
    esac
    shift
done
cluster_use_pg "$pg"
# The cluster, the reference endpoint and the fake endpoints (faults.py: base, base+1, ...).
case "$pg" in
    15) port=${GRID_FAULTS_PORT:-54410} vocab_port=${GRID_FAULTS_ENDPOINT_PORT:-18297}
        fake_base=${GRID_FAULTS_FAKE_PORT:-18298} ;;
    *) port=${GRID_FAULTS_PORT:-54510} vocab_port=${GRID_FAULTS_ENDPOINT_PORT:-19297}
        fake_base=${GRID_FAULTS_FAKE_PORT:-19298} ;;
esac
export GRID_FAULTS_FAKE_PORT=$fake_base
# faults.py runs PostgreSQL's client programs (pgbench, pg_dump) of the same major.
export GRID_PG_BIN=$PG_BIN

venv=${GRID_FAULTS_VENV:-/tmp/grid-faults-venv}
ensure_py_venv "$venv"
run_logged "cargo build -p grid-endpoint" cargo build -p grid-endpoint
# The forbidden-output check the security arm calls (built by the engine tests already).
run_logged "cargo build --profile ci -p grid-cli" cargo build --profile ci -p grid-cli
target_dir="${CARGO_TARGET_DIR:-$GRID_ROOT/target}"
grid_bin="$target_dir/ci/grid"

dir=$(mktemp -d /tmp/grid-faults.XXXXXX)
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
"$target_dir/debug/grid-endpoint" serve --backend mock --mock adversarial --tokenizer builtin \
    --listen "127.0.0.1:$vocab_port" >"$dir/endpoint.log" 2>&1 &
endpoint_pid=$!
for _ in $(seq 50); do
    curl -fsS "http://127.0.0.1:$vocab_port/v1/vocabulary" >"$dir/vocab.json" 2>/dev/null && break
    sleep 0.2
done
kill "$endpoint_pid" 2>/dev/null || true
endpoint_pid=
chmod 755 "$dir"
"$venv/bin/python" tests/faults/faults.py --host "$dir" --port "$port" --db faults \
    --grid "$grid_bin" "${args[@]}"
