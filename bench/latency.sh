#!/usr/bin/env bash
# What an ask costs a user who connects for each question (psql -c, as scripts and most
# tools do): the wall time of `psql -c "SELECT grid.ask(...)"`, one new connection per
# ask, on the demo schema (demo/schema.sql) as the analyst.
#
#   bash bench/latency.sh [--asks N] [--model NAME|PATH] [--spider-dbs IDS]
#
# --asks   asks per configuration (default 8)
# --spider-dbs  Spider dev databases whose questions are asked too (default
#          concert_singer,pets_1,car_1; "" for none): all 19 dumps are loaded as the accuracy
#          harness loads them (../shared/data/spider; skipped with a message when absent),
#          and each database's first --asks dev questions are asked by a role that may read
#          its schema, one new connection each. Each question differs, as users' do, so the
#          endpoint's prefix cache serves the schema but not the question.
# --model  a real model behind the reference endpoint (llama.cpp, one thread;
#          scripts/model.sh: qwen2.5-coder-1.5b, qwen2.5-coder-0.5b or a GGUF path).
#          Without it, the scripted mock (demo/script.json), whose own time is near zero:
#          the wall time is then all grid_pg's.
#
# Each ask's model time is read from the endpoint's step trace (--trace-steps: the model
# thread's time in each step, bench/eval/steptrace.py), and its overhead is the wall time
# less that; the mock has no trace, so its model time is 0.
#
# Configurations: examples off (grid.examples = 0) and on (k = 2; the store holds the
# demo's two examples, one of which the analyst may be shown); a store of 50 examples
# (k = 3), then value hints and descriptions on as well; the first ask after an ALTER
# TABLE of the asker's table, and a new role's first ask; grid.run(generation) of the last
# answer, and grid.run(question) right after grid.ask of it (the answer reused, the model
# not asked), against a plain query in a new connection. Then the first ask after a
# cluster restart, once the warm-up worker has had the endpoint's vocabulary prepared (the
# restart and the warm-up timed apart). Prints one row per configuration (p50
# and p95 of the wall time, of the model's and of the overhead, in ms) and a JSON line.
# Uses the installed extension (cargo pgrx install, debug unless you installed --release:
# say which with the figures).
set -euo pipefail
# `for ... | record`: the pipeline's last command runs in this shell, so its rows stay.
shopt -s lastpipe
# shellcheck source=scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../scripts/lib.sh"
# shellcheck source=scripts/cluster.sh
source "$GRID_ROOT/scripts/cluster.sh"
cd "$GRID_ROOT"

PORT=${GRID_LATENCY_PORT:-54341}
ENDPOINT_PORT=${GRID_LATENCY_ENDPOINT_PORT:-8091}
asks=8
model=""
spider_dbs=concert_singer,pets_1,car_1
while [ $# -gt 0 ]; do
    case $1 in
        --asks) asks=$2; shift 2 ;;
        --model) model=$2; shift 2 ;;
        --spider-dbs) spider_dbs=$2; shift 2 ;;
        *) die "unknown argument $1 (see the head of bench/latency.sh)" ;;
    esac
done
command -v python3 >/dev/null 2>&1 || die "python3 is needed to read the endpoint's step trace"
spider="$GRID_DATA/spider"
if [ -n "$spider_dbs" ] && [ ! -f "$spider/dev.json" ]; then
    note "SKIPPED Spider's databases: no Spider dev at $spider (the project's shared data)"
    spider_dbs=""
fi
if [ -n "$spider_dbs" ]; then
    venv=${GRID_EVAL_VENV:-${GRID_FAULTS_VENV:-/tmp/grid-faults-venv}}
    ensure_py_venv "$venv"
fi

target=${CARGO_TARGET_DIR:-$GRID_ROOT/target}
if [ -n "$model" ]; then
    run_logged "cargo build -p grid-endpoint --features llama" \
        cargo build -p grid-endpoint --features llama --profile ci
    if [ -f "$model" ]; then
        model_path=$(bash scripts/model.sh --model "$model")
    else
        model_path=$(bash scripts/model.sh "$model")
    fi
    # One thread: on two cores, two collapse generation while PostgreSQL is busy.
    serve=("$target/ci/grid-endpoint" serve --backend llama --model "$model_path" --threads 1
        --trace-steps)
    serving="$(basename "$model_path"), llama.cpp, one thread"
else
    run_logged "cargo build -p grid-endpoint" cargo build -p grid-endpoint
    serve=("$target/debug/grid-endpoint" serve --backend mock --mock scripted
        --script demo/script.json --tokenizer builtin)
    serving="scripted mock"
fi
dir=$(mktemp -d /tmp/grid-latency.XXXXXX)
cleanup() {
    [ -f "$dir/endpoint.pid" ] && kill "$(cat "$dir/endpoint.pid")" 2>/dev/null || true
    cluster_stop "$dir"
}
trap cleanup EXIT
say "latency: cluster in $dir (port $PORT), $serving on $ENDPOINT_PORT"
cluster_start "$dir" "$PORT" grid_latency
"${serve[@]}" --listen "127.0.0.1:$ENDPOINT_PORT" >"$dir/endpoint.log" 2>&1 &
echo $! >"$dir/endpoint.pid"
endpoint_wait "$dir" "$ENDPOINT_PORT" latency
psql_as() { cluster_psql "$dir" "$PORT" "$1" grid_latency "${@:2}"; }
psql_as postgres -q -f - <demo/schema.sql
psql_as postgres -q -c "ALTER DATABASE grid_latency SET grid.endpoint = 'http://127.0.0.1:$ENDPOINT_PORT'"
psql_as curator -q -c "INSERT INTO grid.examples (question, sql) VALUES
    ('What is the total amount of all orders?', 'SELECT sum(amount) FROM orders'),
    ('What is the highest salary?', 'SELECT max(salary) FROM salaries')"

now_ms() { echo $(($(date +%s%N) / 1000000)); }
# The model thread's time in the trace lines from line $1 on (ms; 0 without a trace).
model_ms() {
    python3 - "$dir/endpoint.log" "$1" <<'PY'
import sys
sys.path.insert(0, "bench/eval")
from steptrace import steps
mine = steps(sys.argv[1])[int(sys.argv[2]):]
print(int(sum(s["step_ms"] + s["ahead_ms"] for s in mine)))
PY
}
trace_lines() { grep -c '^{"grid_endpoint_step"' "$dir/endpoint.log" || true; }
# Runs one psql -c as role $1 in a new connection; prints "wall model outcome" (ms, and
# ok or the error psql printed: an ask the model's statement fails is timed too, as the
# user waits for it).
timed() {
    local role=$1 sql=$2 before t0 t1 outcome=ok
    before=$(trace_lines)
    t0=$(now_ms)
    if ! psql_as "$role" -Atq -c "$sql" >/dev/null 2>"$dir/timed.err" </dev/null; then
        outcome=failed
        echo "$(date +%T) $role: ${sql:0:200} -> $(head -c 300 "$dir/timed.err")" >>"$dir/failures.log"
    fi
    t1=$(now_ms)
    echo "$((t1 - t0)) $(model_ms "$before") $outcome"
}
ask_sql() { echo "SELECT grid.ask('How many employees work in each department? ($1)')"; }
# p50 and p95 of the numbers on stdin.
stats() { sort -n | awk '{v[NR]=$1} END {
    i=int(NR*0.95+0.999); if (i<1) i=1; if (i>NR) i=NR;
    printf "%d %d", v[int((NR+1)/2)], v[i] }'; }

rows=()
json=()
# Records one configuration from "wall model" lines on stdin.
record() {
    local label=$1 key=$2 lines wall model over n failed
    lines=$(cat)
    n=$(wc -l <<<"$lines")
    wall=$(awk '{print $1}' <<<"$lines" | stats)
    model=$(awk '{print $2}' <<<"$lines" | stats)
    over=$(awk '{print $1 - $2}' <<<"$lines" | stats)
    read -r w50 w95 <<<"$wall"
    read -r m50 m95 <<<"$model"
    read -r o50 o95 <<<"$over"
    failed=$(awk '$3 == "failed"' <<<"$lines" | wc -l)
    rows+=("$(printf '%-34s %4d %7d %7d %7d %7d %7d %7d %6d' "$label" "$n" "$w50" "$w95" "$m50" "$m95" "$o50" "$o95" "$failed")")
    json+=("\"$key\":{\"n\":$n,\"failed\":$failed,\"wall_p50\":$w50,\"wall_p95\":$w95,\"model_p50\":$m50,\"model_p95\":$m95,\"overhead_p50\":$o50,\"overhead_p95\":$o95}")
}

for k in 0 2; do
    # A superuser-only setting: the analyst's sessions take it from its role's default.
    psql_as postgres -q -c "ALTER ROLE analyst SET grid.examples = $k"
    for i in $(seq "$asks"); do timed analyst "$(ask_sql "$k.$i")"; done |
        record "examples = $k, new connection" "examples_$k"
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
for i in $(seq "$asks"); do timed analyst "$(ask_sql "50.$i")"; done |
    record "examples = 3 of a store of 50" examples_3_of_50
psql_as postgres -q -c "ALTER ROLE analyst SET grid.value_hints = 10" \
    -c "SELECT grid.show_values('employees', 'dept')"
psql_as curator -q -c "SELECT grid.describe('orders', 'employee_id', 'The employee who took the order')"
for i in $(seq "$asks"); do timed analyst "$(ask_sql "all.$i")"; done |
    record "+ value hints, descriptions" examples_hints_descriptions
# The first ask after a change of the asker's schema (a new snapshot: its lexicon is built
# again), and a new role's first ask (its own lexicon).
psql_as postgres -q -c "ALTER TABLE employees ADD COLUMN hired date"
timed analyst "$(ask_sql altered)" | record "first ask after ALTER TABLE" first_after_alter
psql_as postgres -q -c "CREATE ROLE newcomer LOGIN IN ROLE grid_user" \
    -c "GRANT SELECT ON employees, orders TO newcomer"
timed newcomer "$(ask_sql "new role")" | record "a new role's first ask" new_role_first

# Spider's databases: each question its own, each role's first ask building its language
# (the first ask of each database is the p95's).
if [ -n "$spider_dbs" ]; then
    "$venv/bin/python" bench/latency/spider.py --host "$dir" --port "$PORT" --db grid_latency \
        --spider "$spider" --dbs "$spider_dbs" --per "$asks" >"$dir/spider-asks.tsv"
    while IFS=$'\t' read -r role sql; do timed "$role" "$sql"; done <"$dir/spider-asks.tsv" \
        >"$dir/spider-times"
    record "Spider: $spider_dbs" spider <"$dir/spider-times"
    if [ "$asks" -gt 1 ]; then
        awk -v k="$asks" 'NR % k != 1' "$dir/spider-times" |
            record "Spider, each role's later asks" spider_later
    fi
fi

# Running what was read: grid.run(generation) of the analyst's last answer, and
# grid.run(question) right after grid.ask of the same question (the answer reused), each
# in a new connection, against what a connection alone costs (psql, a backend, one
# query). The statement's own time is in all three (a count over a few rows).
for i in $(seq "$asks"); do timed analyst "SELECT count(*) FROM employees"; done |
    record "a plain query (baseline)" baseline
psql_as analyst -Atq -c "$(ask_sql run)" >/dev/null
for i in $(seq "$asks"); do
    timed analyst "SELECT * FROM grid.run((SELECT max(generation) FROM grid.my_answers))"
done | record "grid.run(generation)" run_generation
for i in $(seq "$asks"); do
    timed analyst "SET client_min_messages = warning; SELECT * FROM grid.run('How many employees work in each department? (run)')"
done | record "grid.run(question), reused" run_reused
reused=$(psql_as postgres -Atq -c "SELECT count(*) FROM grid.runs WHERE called_as = 'reused'")
[ "$reused" -eq "$asks" ] || die "grid.run(question) asked the model again ($reused of $asks runs reused)"

t0=$(now_ms)
as_postgres "$PG_BIN/pg_ctl" -D "$dir/data" -l "$dir/postgres.log" -w restart >/dev/null
restart=$(($(now_ms) - t0))
# The warm-up worker has the mask worker fetch grid.endpoint's vocabulary after a start: a
# user's first ask comes after it (an ask sent during it waits for it). Its line in the
# server log says when it is done; the wait is timed apart.
t0=$(now_ms)
warmed=""
while [ $(($(now_ms) - t0)) -lt 60000 ]; do
    warmed=$(grep -E 'grid_pg worker: endpoint .* (is ready|could not be prepared)' "$dir/postgres.log" \
        | tail -n 1 || true)
    [ -n "$warmed" ] && break
    sleep 0.1
done
warm=$(($(now_ms) - t0))
[ -n "$warmed" ] || note "no warm-up line in the server log after 60 s"
timed analyst "$(ask_sql restart)" | record "first ask after a restart" first_after_restart
json+=("\"restart_ms\":$restart" "\"warm_ms\":$warm")

say "latency: ms, $serving, $(git rev-parse --short HEAD)"
note "$(printf '%-34s %4s %7s %7s %7s %7s %7s %7s %6s' configuration n wall50 wall95 model50 model95 over50 over95 failed)"
for r in "${rows[@]}"; do note "$r"; done
note "restart of the cluster itself: $restart ms; then the endpoint's warm-up: $warm ms"
note "warm-up: ${warmed#*LOG:  }"
[ -s "$dir/failures.log" ] && note "asks that failed (timed all the same):" && sed 's/^/      /' "$dir/failures.log"
(IFS=,; echo "{\"latency\":{${json[*]}}}")
