#!/usr/bin/env bash
# Set up the machine (scripts/setup.sh), then run every check of the project,
# stopping at the first failure:
#   fmt              cargo fmt --all --check
#   clippy engine    clippy -D warnings on every workspace crate but the extension
#   clippy pg        clippy -D warnings on the extension (pgrx, PostgreSQL 15)
#   clippy pg18      the same for PostgreSQL 18 (feature pg18)
#   engine tests     cargo test on those crates, optimised (profile ci: heavy tests), but
#                    grid-pgref
#   pg differential  clippy and cargo test -p grid-pgref: the language against PostgreSQL 15's own
#                    parser (libpg_query) and the checker's, on random walks, the mocks'
#                    outputs, the grammar's examples and the Spider gold (fixed seed)
#   llama backend    grid-endpoint with feature llama (builds llama.cpp, kept in target/):
#                    clippy, its unit tests, and the real-model tests on Qwen2.5-Coder-0.5B
#                    (scripts/model.sh fetches it once into ~/.cache/grid_pg/models)
#   spider parse     scripts/spider-parse.sh, when ../shared/data is beside the repo
#   pgrx tests       the #[pg_test]s of src/ in a throwaway PostgreSQL 15
#   pgrx tests pg18  on PostgreSQL 18 (the wheel scripts/setup.sh installs), a subset of
#                    them in one build and one cluster: grid.ask/grid.run, the audit,
#                    feedback, and the attacks (PG18_TESTS below)
#   pg parse diff    scripts/pg-parse-diff.sh: the statements of pg differential (CI budget),
#                    the Spider gold and tests/pgref/version_probes.sql parsed by throwaway
#                    PostgreSQL 15 and 18 servers and by libpg_query 15 and 18 (pglast);
#                    fails when the language reads a statement either server refuses.
#                    Skipped without PostgreSQL 18 or the Spider data
#   fault suite      tests/faults/run.sh: endpoint faults, cancellation, load, admission,
#                    fairness, tamper, security and kill -9 arms on a throwaway cluster,
#                    CI counts
#   demo             scripts/demo.sh --mock --check: the README's main job with the scripted
#                    mock, its outcome checked (audited asks, the analyst's salary question
#                    refused, the answers' rows, verify_audit)
#   demo real model  scripts/demo.sh --check: the same on Qwen2.5-Coder-1.5B (llama backend,
#                    one thread; scripts/model.sh fetches it once): real-model asks through
#                    grid.ask that parse, stay inside the roles' grants, answer right on the
#                    rows, and verify in the audit
#   eval harness     bench/eval/test.sh: the accuracy harness's unit tests, and bench/eval.sh
#                    against the scripted mock with EX checked against hand-computed values
#   fuzz             the fuzz crate (fuzz/, its own workspace): fmt, clippy, its seeds
#                    as unit tests, then fuzz/run.sh for 30 s per cargo-fuzz target
#
# Step names on the command line (a space in a name as a dash) run only those steps,
# in the order above, after the setup:
#   bash scripts/test.sh clippy-pg pgrx-tests
set -euo pipefail
# shellcheck source=scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$GRID_ROOT"

# The engine crates: every workspace member but the extension (grid-core,
# grid-cli, grid-vocab, grid-endpoint, ... as they are added). They need no PostgreSQL.
ENGINE=(--workspace --exclude grid_pg)
# The differential test builds libpg_query's C sources: its own step, timed apart, linted
# and tested in one profile so that the C is built once.
DIFFERENTIAL=(-p grid-pgref --profile ci)
PG_FEATURES=(--no-default-features --features pg15)
PG18_FEATURES=(--no-default-features --features pg18)
# The #[pg_test]s run on PostgreSQL 18 as well (the whole suite's result on 18 is in
# tests/RESULTS.md): libtest name filters, any of which selects a test. A test's name is
# tests::<file of src/tests/>::tests::pg_<function>; a filter matches any part of it.
PG18_TESTS=(
    tests::ask::tests::   # grid.ask: grants, DDL, ceilings, bounds, its errors
    tests::run::tests::   # grid.run, grid.explain
    tests::repair::tests::  # refused statements repaired or rewound, never returned
    tests::attacks::tests::  # prompt injection, steering comments, adversarial asks
    tests::decline::tests::  # the model's decline: P0002, audited, grid.decline
    tests::audit::tests::  # the audit store and each ask's: verify, tamper, replay, who reads
    tests::feedback::tests::  # grid.feedback by the asker only, corrections checked as it, the curators' queue, the feedback chain verified
    tests::resolution::tests::  # another role's objects and overloads never bound or planned
    tests::provenance::tests::  # another role's comments never reach a prompt
    tests::meaning::tests::  # one meaning under every setting, by PostgreSQL 18's own lexer
    tests::guc::tests::   # the key hidden, superuser settings refused
    tests::api::tests::pg_every_grid_function  # search_path pinned, invoker, no EXECUTE to PUBLIC
)
# Left out on 18 in CI for their time (they run on 15 in CI, and on 18 in the whole
# suite of tests/RESULTS.md): 200 adversarial asks (2 minutes), and the mocks' outputs
# through 18's lexer under every setting (50 s).
PG18_SKIP=(
    --skip tests::attacks::tests::pg_two_hundred_adversarial_asks
    --skip tests::meaning::tests::pg_the_mocks_outputs_read_the_same
)

STEPS=(fmt clippy-engine clippy-pg clippy-pg18 engine-tests pg-differential llama-backend spider-parse pgrx-tests pgrx-tests-pg18 pg-parse-diff fault-suite demo demo-real-model eval-harness fuzz)
wanted=("$@")
for w in "${wanted[@]}"; do
    [[ " ${STEPS[*]} " == *" $w "* ]] || die "unknown step \"$w\" (steps: ${STEPS[*]})"
done

timings=()
current=""
pgdata=""
pgdata18=""
finish() {
    local rc=$?
    [ -z "$pgdata" ] || rm -rf "$pgdata"
    [ -z "$pgdata18" ] || rm -rf "$pgdata18"
    if [ "${#timings[@]}" -gt 0 ]; then
        say "test: timings"
        printf '    %s\n' "${timings[@]}"
    fi
    if [ "$rc" -ne 0 ]; then
        printf '!!! test: FAILED in step "%s" (exit %d)\n' "$current" "$rc" >&2
    else
        say "test: all checks passed"
    fi
}
trap finish EXIT

# step NAME CMD...: run one check, timed (unless steps were named and NAME is not one).
step() {
    local start=$SECONDS key=${1// /-}
    if [ "${#wanted[@]}" -gt 0 ] && [ "$key" != setup ] &&
        [[ " ${wanted[*]} " != *" $key "* ]]; then
        return 0
    fi
    current=$1
    shift
    say "test: $current"
    "$@"
    timings+=("$(printf '%5ds  %-16s %s free' $((SECONDS - start)) "$current" "$(disk_free)")")
}

# Space left on the disk that holds the build: printed with each step's time, so that a
# run that fills the disk shows which step took it.
disk_free() {
    df -h --output=avail "$GRID_ROOT" 2>/dev/null | tail -n 1 | tr -d ' '
}

spider_parse() {
    if [ -d "$GRID_DATA/spider" ]; then
        bash scripts/spider-parse.sh
    else
        note "SKIPPED: no Spider data at $GRID_DATA/spider (put ../shared/data beside the repo)"
    fi
}

pgrx_tests() {
    # The workspace's default members leave the extension out, so name it: -p
    # for `cargo test`, and PGRX_BUILD_FLAGS for the `cargo pgrx install` that
    # the test harness runs (it passes no package of its own).
    export PGRX_BUILD_FLAGS="--package grid_pg"
    if [ "$(id -u)" -eq 0 ]; then
        # PostgreSQL refuses to run as root. pgrx then installs the extension
        # with sudo and runs initdb/postgres as user postgres (sudo -u), in a
        # PGDATA under this world-writable scratch directory. It lives in /tmp
        # so that user postgres can reach it whatever TMPDIR or $HOME are.
        pgdata=$(mktemp -d /tmp/grid-pgrx-test.XXXXXX)
        chmod 777 "$pgdata"
        CARGO_PGRX_TEST_RUNAS=postgres CARGO_PGRX_TEST_PGDATA="$pgdata" cargo pgrx test pg15 -p grid_pg
    else
        cargo pgrx test pg15 -p grid_pg
    fi
}

pgrx_tests_pg18() {
    export PGRX_BUILD_FLAGS="--package grid_pg"
    # `cargo pgrx test pg18` takes one name filter; cargo test takes several, and pgrx's
    # harness reads the features from this command line (it installs the extension into
    # PostgreSQL 18 with them, then starts one cluster for all the tests).
    local run=(cargo test -p grid_pg --no-default-features --features "pg18 pg_test" --
        "${PG18_TESTS[@]}" "${PG18_SKIP[@]}")
    if [ "$(id -u)" -eq 0 ]; then
        pgdata18=$(mktemp -d /tmp/grid-pgrx-test18.XXXXXX)
        chmod 777 "$pgdata18"
        CARGO_PGRX_TEST_RUNAS=postgres CARGO_PGRX_TEST_PGDATA="$pgdata18" "${run[@]}"
    else
        "${run[@]}"
    fi
}

pg_parse_diff() {
    if [ ! -x "$(pg_bin 18)/postgres" ]; then
        note "SKIPPED: no PostgreSQL 18 at $(pg_bin 18) (scripts/setup.sh installs it)"
    elif [ ! -f "$GRID_DATA/spider/dev_gold_pg.sql" ]; then
        note "SKIPPED: no Spider data at $GRID_DATA/spider (put ../shared/data beside the repo)"
    else
        bash scripts/pg-parse-diff.sh
    fi
}

pg_differential() {
    cargo clippy "${DIFFERENTIAL[@]}" --all-targets -- -D warnings
    cargo test "${DIFFERENTIAL[@]}"
}

llama_backend() {
    local model
    # --profile ci: the same llama.cpp build as the tests (a dev-profile clippy would build
    # llama.cpp a second time).
    cargo clippy -p grid-endpoint --features llama --profile ci --all-targets -- -D warnings
    model=$(bash scripts/model.sh qwen2.5-coder-0.5b)
    # --nocapture: the real-model tests print how often other schedules met a near tie.
    GRID_TEST_MODEL="$model" cargo test -p grid-endpoint --features llama --profile ci --lib --test llama -- --nocapture
}

fuzz_checks() {
    # The fuzz crate's lint and unit tests build in the project's target directory: its
    # dependencies (grid-core, sqlparser, ...) are already built there in the dev
    # profile, so they are reused, not built and stored a second time (fuzz/Cargo.lock
    # pins the project's versions: to refresh it, copy Cargo.lock over it and run
    # `cargo metadata` in fuzz/). cargo fuzz's instrumented build keeps fuzz/target.
    (cd fuzz && cargo fmt --check &&
        CARGO_TARGET_DIR="$GRID_ROOT/target" cargo clippy --all-targets -- -D warnings &&
        CARGO_TARGET_DIR="$GRID_ROOT/target" cargo test --lib)
    bash fuzz/run.sh --seconds 30
}

step "setup" bash scripts/setup.sh
step "fmt" cargo fmt --all --check
step "clippy engine" cargo clippy "${ENGINE[@]}" --exclude grid-pgref --all-targets -- -D warnings
step "clippy pg" cargo clippy -p grid_pg "${PG_FEATURES[@]}" --all-targets -- -D warnings
step "clippy pg18" cargo clippy -p grid_pg "${PG18_FEATURES[@]}" --all-targets -- -D warnings
step "engine tests" cargo test "${ENGINE[@]}" --exclude grid-pgref --profile ci
step "pg differential" pg_differential
step "llama backend" llama_backend
step "spider parse" spider_parse
step "pgrx tests" pgrx_tests
step "pgrx tests pg18" pgrx_tests_pg18
step "pg parse diff" pg_parse_diff
# After the pgrx tests, which installed the extension it runs.
step "fault suite" bash tests/faults/run.sh
step "demo" bash scripts/demo.sh --mock --check
step "demo real model" bash scripts/demo.sh --check
step "eval harness" bash bench/eval/test.sh
step "fuzz" fuzz_checks
current=""
