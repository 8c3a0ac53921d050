#!/usr/bin/env bash
# Parse every gold query of the Spider dev set (1,034 lines of
# ../shared/data/spider/dev_gold_pg.sql) with the `grid parse` command, each
# under its own database's schema from tables.json. The language must refuse
# exactly the lines PostgreSQL 15 refuses (tests/spider_refused_by_postgres.tsv:
# generated SQL must parse in the server that runs it) and parse every other
# one. Passes only when grid exits 0, its summary line,
# {"total":N,"parsed":N,"failed":N}, says total = 1034, and the lines it reports
# as failed are exactly those of the list.
#
#   bash scripts/spider-parse.sh [--show-failures N]
#
# On failure, prints up to N (default 5) lines of grid's other output (its
# reports of the lines that did not parse) and of its stderr.
set -euo pipefail
# shellcheck source=scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$GRID_ROOT"

EXPECTED_TOTAL=1034
show=5
while [ $# -gt 0 ]; do
    case $1 in
    --show-failures)
        [ $# -ge 2 ] || die "--show-failures needs a number"
        show=$2
        shift 2
        ;;
    *) die "usage: $0 [--show-failures N]" ;;
    esac
done

spider="$GRID_DATA/spider"
for f in tables.json dev_gold_pg.sql; do
    [ -f "$spider/$f" ] || die "missing $spider/$f: put the project's shared data at ../shared/data beside the repo"
done
ensure_json_reader

say "spider: building grid (cargo build --profile ci -p grid-cli)"
cargo build --profile ci --quiet -p grid-cli
grid="${CARGO_TARGET_DIR:-target}/ci/grid"

out=$(mktemp "${TMPDIR:-/tmp}/grid-spider.XXXXXX.out")
err=$(mktemp "${TMPDIR:-/tmp}/grid-spider.XXXXXX.err")
trap 'rm -f "$out" "$err"' EXIT

say "spider: grid parse --tables $spider/tables.json --gold $spider/dev_gold_pg.sql"
rc=0
start=$SECONDS
"$grid" parse --tables "$spider/tables.json" --gold "$spider/dev_gold_pg.sql" >"$out" 2>"$err" || rc=$?
summary=$(tail -n 1 "$out")
note "grid exited $rc after $((SECONDS - start))s; summary:"
printf '%s\n' "$summary"

ok=1
if [ "$rc" -ne 0 ]; then
    note "grid exited with status $rc"
    ok=0
fi
if total=$(json_int total "$summary") && parsed=$(json_int parsed "$summary") &&
    failed=$(json_int failed "$summary"); then
    if [ "$total" -ne "$EXPECTED_TOTAL" ]; then
        note "expected total $EXPECTED_TOTAL, got $total"
        ok=0
    fi
    want=$(grep -v '^#' tests/spider_refused_by_postgres.tsv | cut -f1 | sort -n | tr '\n' ' ')
    got=$(head -n -1 "$out" | sed -n 's/.*"line":\([0-9]*\).*/\1/p' | sort -n | tr '\n' ' ')
    if [ "$got" != "$want" ] || [ "$((parsed + failed))" -ne "$total" ]; then
        note "$failed line(s) failed to parse; $parsed of $total parsed"
        note "refused lines: ${got:-none}; PostgreSQL refuses: $want"
        ok=0
    fi
else
    note "the last line of grid's output is not the expected JSON summary"
    ok=0
fi

if [ "$ok" -ne 1 ]; then
    if [ "$show" -gt 0 ]; then
        if [ "$(wc -l <"$out")" -gt 1 ]; then
            note "first lines of grid's report:"
            head -n -1 "$out" | head -n "$show"
        fi
        if [ -s "$err" ]; then
            note "first lines of grid's stderr:"
            head -n "$show" "$err"
        fi
    fi
    die "spider parse: FAILED"
fi
say "spider parse: $parsed of $total lines parsed; refused exactly the lines PostgreSQL refuses ($want)"
