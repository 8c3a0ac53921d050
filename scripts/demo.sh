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
# --check (CI): after the session, checks what it must show (below) and stops the
# cluster and the endpoint; exits non-zero when a check fails.
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
check=0
case "${1:-}" in
    --check) check=1 ;;
    "") ;;
    *) die "unknown argument $1 (see the head of scripts/demo.sh)" ;;
esac

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
psql_as postgres grid_demo -f - <demo/demo.sql 2>&1 | tee "$dir/session.log"

if [ "$check" -eq 1 ]; then
    say "demo: check"
    failed=0
    expect() {
        local what=$1 query=$2 want=$3 got
        got=$(psql_as postgres grid_demo -Atq -c "$query" 2>&1) || true
        if [ "$got" = "$want" ]; then
            note "ok: $what"
        else
            printf '!!! demo check failed: %s: got %q, expected %q\n' "$what" "$got" "$want" >&2
            failed=1
        fi
    }
    expect "every ask of the session is audited (5 analyst, 2 hr, 2 clerk asks at least)" \
        "SELECT bool_and(n >= want) FROM (VALUES ('analyst', 5), ('hr', 2), ('clerk', 2)) AS w(role, want)
           LEFT JOIN LATERAL (SELECT count(*) AS n FROM grid.generations
                               WHERE current_user_name = w.role) AS c ON true" t
    expect "no statement the model wrote as the analyst names salaries" \
        "SELECT count(*) FROM grid.generations WHERE current_user_name = 'analyst'
            AND final_sql ~* '\msalaries\M'" 0
    expect "the analyst's salary question returned no statement (refused, repaired, refused)" \
        "SELECT bool_and(refused IS NOT NULL) AND count(*) = 4 FROM grid.generations
          WHERE current_user_name = 'analyst' AND question ILIKE '%salary%'" t
    expect "hr's salary question names salaries" \
        "SELECT bool_or(final_sql ILIKE '%FROM salaries%') FROM grid.generations
          WHERE current_user_name = 'hr' AND question ILIKE '%salary%'" t
    expect "the clerk's order is an INSERT into orders" \
        "SELECT bool_and(final_sql ILIKE 'INSERT INTO orders%') FROM grid.generations
          WHERE current_user_name = 'clerk'" t
    expect "the clerk's grid.run wrote nothing" \
        "SELECT count(*) FROM orders WHERE id = 104" 0
    if grep -q 'NOTICE:  grid.ask: the statement returned writes (INSERT on orders)' "$dir/session.log"; then
        note "ok: the clerk's INSERT came with a NOTICE naming orders"
    else
        printf '!!! demo check failed: no NOTICE naming the target of the clerk'"'"'s INSERT\n' >&2
        failed=1
    fi
    expect "grid.verify_audit() passes" "SELECT ok FROM grid.verify_audit()" t
    # The two errors the session shows on purpose: the analyst's refused salary statement,
    # and grid.run refusing the clerk's INSERT.
    errors=$(grep -c '^psql:.*ERROR:' "$dir/session.log" || true)
    refused=$(grep -c 'ERROR:  grid.ask: the model.s statement is not allowed for role "analyst"' \
        "$dir/session.log" || true)
    read_only=$(grep -c 'ERROR:  grid.run runs read-only statements' "$dir/session.log" || true)
    if [ "$errors" -eq 2 ] && [ "$refused" -eq 1 ] && [ "$read_only" -eq 1 ]; then
        note "ok: the session's only errors are the analyst's refused statement and grid.run refusing the clerk's INSERT"
    else
        printf '!!! demo check failed: %s errors in the session (expected the two shown on purpose)\n' \
            "$errors" >&2
        grep 'ERROR:' "$dir/session.log" >&2 || true
        failed=1
    fi
    kill "$(cat "$dir/endpoint.pid")" 2>/dev/null || true
    cluster_stop "$dir"
    [ "$failed" -eq 0 ] || die "demo: checks failed (session log: $dir/session.log)"
    say "demo: checks passed"
    exit 0
fi

say "demo: done"
cat <<DONE
Go on with:
    sudo -u postgres psql -h $dir -p $PORT -U analyst grid_demo
    grid_demo=> SELECT grid.ask('How many employees are in each department?');
Stop it with:
    kill \$(cat $dir/endpoint.pid); sudo -u postgres $PG_BIN/pg_ctl -D $dir/data stop
DONE
