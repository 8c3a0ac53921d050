#!/usr/bin/env bash
# What an ask costs a user who connects for each question (psql -c, as scripts and most
# tools do): the wall time of `psql -c "SELECT grid.ask(...)"`, one new connection per
# ask, on the demo schema (demo/schema.sql) as the analyst, with the scripted mock model
# (demo/script.json), whose own time is near zero: what is measured is grid_pg's overhead.
#
#   bash bench/latency.sh [--asks N]
#
# --asks   asks per configuration (default 8)
#
# Configurations: examples off (grid.examples = 0) and on (k = 2; the store holds the
# demo's two examples, one of which the analyst may be shown); grid.run(generation) of the
# last answer, and grid.run(question) right after grid.ask of it (the answer reused, the
# model not asked); a store of 50 examples (k = 3), then value hints and descriptions on
# as well; the first ask after an ALTER TABLE of the asker's table, and a new role's first
# ask. Then the first ask after a cluster restart (the restart itself timed apart). Prints one row per configuration
# (p50, p95, max in ms) and a JSON line. Uses the installed extension (cargo pgrx install,
# debug unless you installed --release: say which with the figures) and builds the
# reference endpoint (debug). The real model's time and Spider's databases are not
# measured yet (issue 32).
set -euo pipefail
# shellcheck source=scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../scripts/lib.sh"
# shellcheck source=scripts/cluster.sh
source "$GRID_ROOT/scripts/cluster.sh"
cd "$GRID_ROOT"

PORT=${GRID_LATENCY_PORT:-54341}
ENDPOINT_PORT=${GRID_LATENCY_ENDPOINT_PORT:-8091}
asks=8
while [ $# -gt 0 ]; do
    case $1 in
        --asks) asks=$2; shift 2 ;;
        *) die "unknown argument $1 (see the head of bench/latency.sh)" ;;
    esac
done

run_logged "cargo build -p grid-endpoint" cargo build -p grid-endpoint
dir=$(mktemp -d /tmp/grid-latency.XXXXXX)
cleanup() {
    [ -f "$dir/endpoint.pid" ] && kill "$(cat "$dir/endpoint.pid")" 2>/dev/null || true
    cluster_stop "$dir"
}
trap cleanup EXIT
say "latency: cluster in $dir (port $PORT), scripted mock on $ENDPOINT_PORT"
cluster_start "$dir" "$PORT" grid_latency
"${CARGO_TARGET_DIR:-$GRID_ROOT/target}/debug/grid-endpoint" serve --backend mock --mock scripted --script demo/script.json \
    --tokenizer builtin --listen "127.0.0.1:$ENDPOINT_PORT" >"$dir/endpoint.log" 2>&1 &
echo $! >"$dir/endpoint.pid"
endpoint_wait "$dir" "$ENDPOINT_PORT" latency
psql_as() { cluster_psql "$dir" "$PORT" "$1" grid_latency "${@:2}"; }
psql_as postgres -q -f - <demo/schema.sql
psql_as postgres -q -c "ALTER DATABASE grid_latency SET grid.endpoint = 'http://127.0.0.1:$ENDPOINT_PORT'"
psql_as curator -q -c "INSERT INTO grid.examples (question, sql) VALUES
    ('What is the total amount of all orders?', 'SELECT sum(amount) FROM orders'),
    ('What is the highest salary?', 'SELECT max(salary) FROM salaries')"

now_ms() { echo $(($(date +%s%N) / 1000000)); }
# One ask in a new connection; prints its wall time in ms.
ask_ms() {
    local i=$1 t0 t1
    t0=$(now_ms)
    psql_as analyst -Atq -c "SELECT grid.ask('How many employees work in each department? ($i)')" \
        >/dev/null
    t1=$(now_ms)
    echo $((t1 - t0))
}
# p50, p95 and max of the numbers on stdin.
stats() { sort -n | awk '{v[NR]=$1} END {
    p50=v[int((NR+1)/2)]; i=int(NR*0.95+0.999); if (i<1) i=1; if (i>NR) i=NR;
    printf "%d %d %d", p50, v[i], v[NR] }'; }

rows=()
json=()
for k in 0 2; do
    # A superuser-only setting: the analyst's sessions take it from its role's default.
    psql_as postgres -q -c "ALTER ROLE analyst SET grid.examples = $k"
    times=$(for i in $(seq "$asks"); do ask_ms "$k.$i"; done)
    read -r p50 p95 max <<<"$(stats <<<"$times")"
    rows+=("$(printf '%-28s %5d %8d %8d %8d' "examples = $k, new connection" "$asks" "$p50" "$p95" "$max")")
    json+=("\"examples_$k\":{\"asks\":$asks,\"p50_ms\":$p50,\"p95_ms\":$p95,\"max_ms\":$max}")
done
# As a store grows and the prompt carries more: a store of 50 examples (k = 3), then
# value hints and descriptions on as well (the configuration issue 32's targets name).
psql_as curator -q -c "INSERT INTO grid.examples (question, sql)
    SELECT 'How many orders did employee ' || i || ' take?',
           'SELECT count(*) FROM orders WHERE employee_id = ' || i
      FROM generate_series(1, 24) AS i
    UNION ALL
    SELECT 'What did employee ' || i || ' earn?', 'SELECT salary FROM salaries WHERE employee_id = ' || i
      FROM generate_series(1, 24) AS i"
psql_as postgres -q -c "ALTER ROLE analyst SET grid.examples = 3"
times=$(for i in $(seq "$asks"); do ask_ms "50.$i"; done)
read -r p50 p95 max <<<"$(stats <<<"$times")"
rows+=("$(printf '%-28s %5d %8d %8d %8d' "examples = 3 of a store of 50" "$asks" "$p50" "$p95" "$max")")
json+=("\"examples_3_of_50\":{\"asks\":$asks,\"p50_ms\":$p50,\"p95_ms\":$p95,\"max_ms\":$max}")
psql_as postgres -q -c "ALTER ROLE analyst SET grid.value_hints = 10" \
    -c "SELECT grid.show_values('employees', 'dept')"
psql_as curator -q -c "SELECT grid.describe('orders', 'employee_id', 'The employee who took the order')"
times=$(for i in $(seq "$asks"); do ask_ms "all.$i"; done)
read -r p50 p95 max <<<"$(stats <<<"$times")"
rows+=("$(printf '%-28s %5d %8d %8d %8d' "+ value hints, descriptions" "$asks" "$p50" "$p95" "$max")")
json+=("\"examples_hints_descriptions\":{\"asks\":$asks,\"p50_ms\":$p50,\"p95_ms\":$p95,\"max_ms\":$max}")
# The first ask after a change of the asker's schema (a new snapshot: its lexicon is built
# again), and a new role's first ask (its own lexicon).
psql_as postgres -q -c "ALTER TABLE employees ADD COLUMN hired date"
altered=$(ask_ms altered)
rows+=("$(printf '%-28s %5d %8d %8s %8s' "first ask after ALTER TABLE" 1 "$altered" - -)")
psql_as postgres -q -c "CREATE ROLE newcomer LOGIN IN ROLE grid_user" \
    -c "GRANT SELECT ON employees, orders TO newcomer"
t0=$(now_ms)
psql_as newcomer -Atq -c "SELECT grid.ask('How many employees work in each department? (new role)')" \
    >/dev/null
newcomer=$(($(now_ms) - t0))
rows+=("$(printf '%-28s %5d %8d %8s %8s' "a new role's first ask" 1 "$newcomer" - -)")
json+=("\"first_after_alter_ms\":$altered,\"new_role_first_ms\":$newcomer")

# Running what was read: grid.run(generation) of the analyst's last answer, and
# grid.run(question) right after grid.ask of the same question (the answer reused), each
# in a new connection. The statement's own time is in both (a count over 5 rows).
psql_as analyst -Atq -c "SELECT grid.ask('How many employees work in each department? (run)')" >/dev/null
run_ms() {
    local t0 t1
    t0=$(now_ms)
    psql_as analyst -Atq -c "$1" >/dev/null
    t1=$(now_ms)
    echo $((t1 - t0))
}
# What a connection alone costs (psql, a backend, one query), to read the others against.
times=$(for i in $(seq "$asks"); do run_ms "SELECT count(*) FROM employees"; done)
read -r p50 p95 max <<<"$(stats <<<"$times")"
rows+=("$(printf '%-28s %5d %8d %8d %8d' "a plain query (baseline)" "$asks" "$p50" "$p95" "$max")")
json+=("\"baseline\":{\"runs\":$asks,\"p50_ms\":$p50,\"p95_ms\":$p95,\"max_ms\":$max}")
times=$(for i in $(seq "$asks"); do
    run_ms "SELECT * FROM grid.run((SELECT max(generation) FROM grid.my_answers))"
done)
read -r p50 p95 max <<<"$(stats <<<"$times")"
rows+=("$(printf '%-28s %5d %8d %8d %8d' "grid.run(generation)" "$asks" "$p50" "$p95" "$max")")
json+=("\"run_generation\":{\"runs\":$asks,\"p50_ms\":$p50,\"p95_ms\":$p95,\"max_ms\":$max}")
times=$(for i in $(seq "$asks"); do
    run_ms "SET client_min_messages = warning; SELECT * FROM grid.run('How many employees work in each department? (run)')"
done)
read -r p50 p95 max <<<"$(stats <<<"$times")"
rows+=("$(printf '%-28s %5d %8d %8d %8d' "grid.run(question), reused" "$asks" "$p50" "$p95" "$max")")
json+=("\"run_reused\":{\"runs\":$asks,\"p50_ms\":$p50,\"p95_ms\":$p95,\"max_ms\":$max}")
reused=$(psql_as postgres -Atq -c "SELECT count(*) FROM grid.runs WHERE called_as = 'reused'")
[ "$reused" -eq "$asks" ] || die "grid.run(question) asked the model again ($reused of $asks runs reused)"

t0=$(now_ms)
as_postgres "$PG_BIN/pg_ctl" -D "$dir/data" -l "$dir/postgres.log" -w restart >/dev/null
restart=$(($(now_ms) - t0))
first=$(ask_ms restart)
rows+=("$(printf '%-28s %5d %8d %8s %8s' "first ask after a restart" 1 "$first" - -)")
json+=("\"restart_ms\":$restart,\"first_after_restart_ms\":$first")

say "latency: wall time (ms), scripted mock, $(git rev-parse --short HEAD)"
note "$(printf '%-28s %5s %8s %8s %8s' configuration asks p50 p95 max)"
for r in "${rows[@]}"; do note "$r"; done
note "restart of the cluster itself: $restart ms"
(IFS=,; echo "{\"latency\":{${json[*]}}}")
