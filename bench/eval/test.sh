#!/usr/bin/env bash
# The accuracy harness's own tests (a step of scripts/test.sh):
#   1. the unit tests of bench/eval/ (result comparison, failure classes, inputs, figures);
#   2. bench/eval.sh against the scripted mock on Spider dev questions 0-7, with a script
#      right for some and wrong for others, checked against hand-computed EX
#      (tests/ci_check.py says which and why); skipped without ../shared/data;
#   3. bench/eval.sh on a BIRD-style question file (evidence as a hint) over a DDL-only
#      schema: "executes" by EXPLAIN, EX null.
# The Spider run asks in run.py's default arms and grid+examples (leave-one-out examples);
# an arm whose setting the installed extension lacks is reported skipped. Uses the installed
# extension (--no-install: scripts/test.sh's pgrx step installed it) and the debug
# grid-endpoint.
set -euo pipefail
# shellcheck source=scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../../scripts/lib.sh"
cd "$GRID_ROOT"

venv=${GRID_EVAL_VENV:-${GRID_FAULTS_VENV:-/tmp/grid-faults-venv}}
ensure_py_venv "$venv"
here=bench/eval/tests
out=$(mktemp -d /tmp/grid-eval-test.XXXXXX)
trap 'rm -rf "$out"' EXIT

say "eval: unit tests"
"$venv/bin/python" -m unittest discover -s "$here" -p 'test_*.py'

run() {
    local name=$1
    shift
    say "eval: $name run (scripted mock)"
    if ! bash bench/eval.sh --no-install --skip-unavailable-arms --out "$out/$name.jsonl" "$@" \
        >"$out/$name.out" 2>"$out/$name.err"; then
        cat "$out/$name.err" "$out/$name.out" >&2
        die "eval: the $name run failed"
    fi
    grep -E '^arm .* is unavailable' "$out/$name.err" | sed 's/^/    SKIPPED: /' || true
    if ! "$venv/bin/python" "$here/ci_check.py" "$name" "$out/$name.jsonl" "$out/$name.out" | sed 's/^/    /'; then
        cat "$out/$name.out" >&2
        die "eval: the $name run's checks failed"
    fi
}

if [ -f "$GRID_DATA/spider/dev.json" ]; then
    run spider --mock-script "$here/spider_script.json" --limit 8 \
        --arms grid,grid-no-repair,unconstrained,grid+examples
else
    note "SKIPPED the Spider run: no Spider data at $GRID_DATA/spider (put ../shared/data beside the repo)"
fi
run bird --mock-script "$here/bird_script.json" --questions "$here/bird_questions.json" --schemas "$here/ddl"
say "eval: checks passed"
