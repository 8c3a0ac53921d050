#!/usr/bin/env bash
# Runs the cargo-fuzz targets for a bounded time each and prints one row per target
# (executions, exec/s, coverage, corpus, crashes), then a JSON line.
#
#   bash fuzz/run.sh [--seconds N] [--targets a,b,...] [--corpus DIR]
#
# --seconds   time per target (default 30: the CI run; the recorded long run uses 600)
# --targets   default: lexer_parser,mask_oracle,audit_verify,endpoint_reply,reserve_completion,
#             returned_text;
#             pg_parse (the language against PostgreSQL's parser) builds libpg_query and is
#             asked for by name (the CI run leaves it out; `cargo test -p grid-pgref` covers
#             it there)
# --corpus    where the grown corpus is kept (default fuzz/corpus, git-ignored); the
#             committed seeds in fuzz/seeds/<target> are read as a second corpus
#
# Installs cargo-fuzz if missing. On the stable toolchain libFuzzer's coverage works but
# the sanitizers need nightly, so targets build with `--sanitizer none` and with debug
# assertions on (`-a`): what is found is a failed property, a panic, an overflow, a hang
# (-timeout) or runaway memory (-rss_limit_mb). A failure leaves its input in
# fuzz/artifacts/<target>/ and this script exits non-zero after printing it.
set -euo pipefail
# shellcheck source=scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../scripts/lib.sh"
cd "$GRID_ROOT/fuzz"

CARGO_FUZZ_VERSION=0.13.2
seconds=30
targets=lexer_parser,mask_oracle,audit_verify,endpoint_reply,reserve_completion,returned_text
corpus_root=corpus
while [ $# -gt 0 ]; do
    case $1 in
        --seconds) seconds=$2; shift 2 ;;
        --targets) targets=$2; shift 2 ;;
        --corpus) corpus_root=$2; shift 2 ;;
        *) die "unknown argument $1 (see the head of fuzz/run.sh)" ;;
    esac
done

if ! cargo fuzz --version >/dev/null 2>&1; then
    say "fuzz: installing cargo-fuzz $CARGO_FUZZ_VERSION"
    run_logged "cargo install cargo-fuzz" \
        cargo install cargo-fuzz --version "$CARGO_FUZZ_VERSION" --locked
fi

FLAGS=(--sanitizer none --debug-assertions)
case ",$targets," in *,pg_parse,*) FLAGS+=(--features pg) ;; esac
say "fuzz: build ($(cargo fuzz --version))"
run_logged "cargo fuzz build" cargo fuzz build "${FLAGS[@]}"

rows=()
json=()
failed=0
IFS=, read -r -a list <<<"$targets"
for t in "${list[@]}"; do
    [ -d "seeds/$t" ] || die "no seeds for target $t (fuzz/seeds/$t)"
    mkdir -p "$corpus_root/$t"
    log=$(mktemp "${TMPDIR:-/tmp}/grid-fuzz-$t.XXXXXX.log")
    say "fuzz: $t for ${seconds}s"
    rc=0
    cargo fuzz run "${FLAGS[@]}" "$t" "$corpus_root/$t" "seeds/$t" -- \
        -max_total_time="$seconds" -max_len=512 -timeout=20 -rss_limit_mb=4096 \
        -print_final_stats=1 >"$log" 2>&1 || rc=$?
    execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
    rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1)
    rss=$(sed -n 's/^stat::peak_rss_mb: *//p' "$log" | tail -1)
    last=$(grep -E '^#[0-9]+' "$log" | tail -1 || true)
    cov=$(sed -n 's/.* cov: \([0-9]*\).*/\1/p' <<<"$last")
    ft=$(sed -n 's/.* ft: \([0-9]*\).*/\1/p' <<<"$last")
    corp=$(find "$corpus_root/$t" -type f | wc -l)
    crashes=0
    if [ "$rc" -ne 0 ]; then
        crashes=1
        failed=1
        printf '!!! fuzz: %s failed (exit %d); last lines of %s:\n' "$t" "$rc" "$log" >&2
        grep -vE '^#[0-9]+' "$log" | tail -n 40 >&2
    else
        rm -f "$log"
    fi
    rows+=("$(printf '%-15s %10s %8s %6s %6s %7s %7s %7s' "$t" "${execs:-?}" "${rate:-?}" \
        "${cov:-?}" "${ft:-?}" "$corp" "${rss:-?}" "$crashes")")
    json+=("\"$t\":{\"seconds\":$seconds,\"execs\":${execs:-null},\"exec_per_s\":${rate:-null},\"cov\":${cov:-null},\"ft\":${ft:-null},\"corpus\":$corp,\"peak_rss_mb\":${rss:-null},\"crashes\":$crashes}")
done

say "fuzz: results"
printf '    %-15s %10s %8s %6s %6s %7s %7s %7s\n' target execs exec/s cov ft corpus rss_mb crashes
printf '    %s\n' "${rows[@]}"
(IFS=,; printf '{"fuzz":{%s}}\n' "${json[*]}")
[ "$failed" -eq 0 ] || die "fuzz: a target failed; its input is under fuzz/artifacts/"
