#!/usr/bin/env bash
# The main job: grid.ask inside PostgreSQL, end to end, on a throwaway cluster.
#
#   1. sets up what is missing (scripts/setup.sh: PostgreSQL 15, clang, cargo-pgrx);
#   2. builds and installs the extension, and builds the reference endpoint;
#   3. starts a throwaway PostgreSQL 15 cluster with the mask worker preloaded, and
#      the reference endpoint running the *scripted mock model* (demo/script.json:
#      it "wants" to write given SQL, but can only pick tokens the mask allows);
#   4. loads demo/schema.sql: employees, orders, salaries; roles analyst (no
#      salaries), hr (all three), clerk (may INSERT orders), auditor;
#   5. runs demo/demo.sql: each role asks, the analyst's salary question is
#      blocked, the audit rows and grid.verify_audit() are shown;
#   6. prints the psql command to go on, and how to stop the cluster.
#
# The model is scripted, not a language model: see the README for pointing
# grid.endpoint at a real vLLM server. GRID_DEMO_TOKENIZER=<tokenizer dir>
# makes the endpoint use a real vocabulary (e.g. ../shared/data/tokenizers/gpt2)
# instead of the built-in one.
set -euo pipefail
# shellcheck source=scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$GRID_ROOT"

# shellcheck source=scripts/cluster.sh
source "$(dirname "${BASH_SOURCE[0]}")/cluster.sh"
PORT=${GRID_DEMO_PORT:-54329}
ENDPOINT_PORT=${GRID_DEMO_ENDPOINT_PORT:-8077}

bash scripts/setup.sh

say "demo: build and install the extension"
run_logged "cargo pgrx install" as_root env PATH="$PATH" CARGO_HOME="${CARGO_HOME:-$HOME/.cargo}" \
    RUSTUP_HOME="${RUSTUP_HOME:-$HOME/.rustup}" PGRX_HOME="${PGRX_HOME:-$HOME/.pgrx}" \
    cargo pgrx install --package grid_pg --pg-config "$PG_BIN/pg_config"
say "demo: build the reference endpoint"
run_logged "cargo build -p grid-endpoint" cargo build -p grid-endpoint
endpoint_bin="$GRID_ROOT/target/debug/grid-endpoint"

say "demo: start a throwaway cluster and the endpoint"
dir=$(mktemp -d /tmp/grid-demo.XXXXXX)
cluster_start "$dir" "$PORT" grid_demo
tokenizer=${GRID_DEMO_TOKENIZER:-builtin}
"$endpoint_bin" serve --backend mock --mock scripted --script demo/script.json \
    --tokenizer "$tokenizer" --listen "127.0.0.1:$ENDPOINT_PORT" >"$dir/endpoint.log" 2>&1 &
echo $! >"$dir/endpoint.pid"
for _ in $(seq 50); do
    curl -fsS "http://127.0.0.1:$ENDPOINT_PORT/v1/vocabulary" >/dev/null 2>&1 && break
    sleep 0.2
done
note "cluster in $dir (port $PORT), endpoint http://127.0.0.1:$ENDPOINT_PORT (scripted mock, tokenizer $tokenizer)"

psql_as() { cluster_psql "$dir" "$PORT" "$1" "$2" "${@:3}"; }
psql_as postgres grid_demo -q -f - <demo/schema.sql
psql_as postgres grid_demo -q -c "ALTER DATABASE grid_demo SET grid.endpoint = 'http://127.0.0.1:$ENDPOINT_PORT'"

say "demo: the session (demo/demo.sql)"
psql_as postgres grid_demo -f - <demo/demo.sql

say "demo: done"
cat <<DONE
Go on with:
    sudo -u postgres psql -h $dir -p $PORT -U analyst grid_demo
    grid_demo=> SELECT grid.ask('How many employees are in each department?');
Stop it with:
    kill \$(cat $dir/endpoint.pid); sudo -u postgres $PG_BIN/pg_ctl -D $dir/data stop
DONE
