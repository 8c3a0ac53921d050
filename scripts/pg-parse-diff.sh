#!/usr/bin/env bash
# The language differential against PostgreSQL 18's own parse (issue 37, item 4).
#
# grid-pgref (the language, and PostgreSQL 15's parser through the pg_query crate) judges
# the random walks, the mocks' outputs, the grammar's examples and, with ../shared/data,
# the Spider dev gold, and the probes of tests/pgref/version_probes.sql (statements the
# versions are known to read differently), and dumps every statement with both verdicts.
# Then the same statements are parsed again by
#   - a throwaway PostgreSQL 15 and a throwaway PostgreSQL 18 server (the raw parser only:
#     each statement compiled in a PL/pgSQL body, tests/pgref/server_parse.py says why),
#   - libpg_query 15 and 18 through pglast 5 and 8, whose parse trees are compared
#     (the servers say accept or refuse; the trees say whether both read the same thing).
# Prints a table of counts and lists every statement the two versions read differently,
# and every one on which the language and PostgreSQL 18 disagree.
#
#   bash scripts/pg-parse-diff.sh
#   GRID_PGREF_ARGS="--walks 1000 --seed 7" bash scripts/pg-parse-diff.sh    a bigger run
#
# Exits 1 when a statement the language reads is refused by either server (generated SQL
# must parse in the server that runs it); the differences listed are the result, not a
# failure. Keeps its files in results/pg-parse-diff/ (gitignored). Starts and stops its own
# clusters on ports $GRID_PGDIFF_PORT and the next (default 28890, 28891) as user
# postgres when run as root. Python: two virtualenvs beside the fault suite's,
# $GRID_PGDIFF_VENV (psycopg, pglast 8) and $GRID_PGDIFF_VENV-15 (pglast 5).
set -euo pipefail
# shellcheck source=scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$GRID_ROOT"

start=$SECONDS
for m in 15 18; do
    [ -x "$(pg_bin "$m")/postgres" ] ||
        die "no PostgreSQL $m at $(pg_bin "$m") (bash scripts/setup.sh installs it)"
done
venv=${GRID_PGDIFF_VENV:-/tmp/grid-pgdiff-venv}
port=${GRID_PGDIFF_PORT:-28890}
out=results/pg-parse-diff
mkdir -p "$out"

# pglast's major follows PostgreSQL's: 5.x is libpg_query 15, 8.x libpg_query 18.
py_venv() {
    local dir=$1 want=$2
    if ! "$dir/bin/python" -c "import pglast, psycopg; assert pglast.__version__ == 'v$want'" 2>/dev/null; then
        rm -rf "$dir"
        run_logged "python venv at $dir" python3 -m venv "$dir"
        run_logged "pip install pglast==$want psycopg" "$dir/bin/pip" install --quiet \
            "pglast==$want" "psycopg[binary]==3.3.*"
    fi
}
py_venv "$venv" 8.8
py_venv "$venv-15" 5.10

say "pg-parse-diff: building grid-pgref (cargo build -p grid-pgref --profile ci)"
cargo build --quiet -p grid-pgref --profile ci
pgref="${CARGO_TARGET_DIR:-target}/ci/grid-pgref"

data_args=()
if [ -f "$GRID_DATA/spider/dev_gold_pg.sql" ]; then
    data_args=(--data "$GRID_DATA")
else
    note "SKIPPED: the Spider gold and the Spider walks and mocks (no $GRID_DATA/spider)"
fi
say "pg-parse-diff: grid-pgref --dump ${data_args[*]} ${GRID_PGREF_ARGS:-}"
# grid-pgref exits 1 on a disagreement with PostgreSQL 15's parser, which is the "pg
# differential" step's to report; here only the dump matters.
# GRID_DATA_DIR: without --data grid-pgref would look for ../shared/data by itself.
# shellcheck disable=SC2086 # GRID_PGREF_ARGS is a list of options
GRID_DATA_DIR="$GRID_DATA" "$pgref" "${data_args[@]}" --dump "$out/judged.jsonl" --probes tests/pgref/version_probes.sql \
    ${GRID_PGREF_ARGS:-} \
    >"$out/pgref.out" 2>"$out/pgref.err" || true
[ -s "$out/judged.jsonl" ] || {
    tail -n 20 "$out/pgref.err" >&2
    die "grid-pgref wrote no statements"
}
note "$(wc -l <"$out/judged.jsonl") statements judged; grid-pgref's tally: $(tail -n 1 "$out/pgref.out")"

say "pg-parse-diff: libpg_query 15 and 18 (pglast)"
"$venv-15/bin/python" tests/pgref/server_parse.py tree --out "$out/tree15.jsonl" "$out/judged.jsonl"
"$venv/bin/python" tests/pgref/server_parse.py tree --out "$out/tree18.jsonl" "$out/judged.jsonl"

dir=$(mktemp -d /tmp/grid-pgdiff.XXXXXX)
chmod 755 "$dir"
as_postgres() { if [ "$(id -u)" -eq 0 ]; then sudo -u postgres "$@"; else "$@"; fi; }
[ "$(id -u)" -ne 0 ] || chown postgres: "$dir"
running=""
cleanup() {
    [ -z "$running" ] ||
        as_postgres "$(pg_bin "$running")/pg_ctl" -D "$dir/pg$running" stop -m fast >/dev/null 2>&1 || true
    rm -rf "$dir"
}
trap cleanup EXIT

for m in 15 18; do
    bin=$(pg_bin "$m")
    say "pg-parse-diff: PostgreSQL $m's server ($("$bin/postgres" --version)), port $port"
    as_postgres "$bin/initdb" -D "$dir/pg$m" --auth=trust -U postgres >"$dir/initdb$m.log" 2>&1 ||
        { cat "$dir/initdb$m.log"; die "initdb of PostgreSQL $m failed"; }
    # No TCP: the socket in the scratch directory only.
    as_postgres "$bin/pg_ctl" -D "$dir/pg$m" -l "$dir/pg$m.log" -w \
        -o "-p $port -c listen_addresses='' -c unix_socket_directories='$dir'" start >/dev/null ||
        { cat "$dir/pg$m.log"; die "PostgreSQL $m did not start (port $port taken?)"; }
    running=$m
    "$venv/bin/python" tests/pgref/server_parse.py server --host "$dir" --port "$port" \
        --out "$out/server$m.jsonl" "$out/judged.jsonl"
    as_postgres "$bin/pg_ctl" -D "$dir/pg$m" stop -m fast >/dev/null
    running=""
    port=$((port + 1))
done

say "pg-parse-diff: the report (also in $out/report.txt)"
rc=0
python3 tests/pgref/server_parse.py report --server15 "$out/server15.jsonl" \
    --server18 "$out/server18.jsonl" --tree15 "$out/tree15.jsonl" --tree18 "$out/tree18.jsonl" \
    "$out/judged.jsonl" | tee "$out/report.txt" || rc=$?
note "pg-parse-diff: $((SECONDS - start))s"
[ "$rc" -eq 0 ] || die "a statement the language reads is refused by a PostgreSQL server (above)"
