#!/usr/bin/env bash
# Mask-time benchmarks on Spider dev gold, per vocabulary:
#   `grid bench` (GRID and llguidance in process), XGrammar (bench/peers/xgrammar_bench.py
#   on `grid bench-export`'s files) and `grid bench-r` (flat cost along long streams).
#
#   bash bench/masks.sh [--every K] [--limit N] [--reps N] [--vocab NAME]... [--no-xgrammar]
#                       [--no-bench-r] [--bench-r-n N]
#
# Defaults: every statement, 3 repetitions (the first cold), vocabularies gpt2, qwen2_5 and
# llama3. Each tool's full output goes to $GRID_BENCH_OUT (default: a fresh directory under
# ${TMPDIR:-/tmp}); the last line of each is its JSON summary, printed at the end.
# XGrammar runs in a virtualenv at $GRID_BENCH_VENV (default /tmp/grid-bench-venv), created
# on first use with `pip install xgrammar==0.2.8` (it pulls torch: several GB).
# Built with `--release`: the times are the benchmark.
set -euo pipefail
# shellcheck source=scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../scripts/lib.sh"
cd "$GRID_ROOT"

every=1
limit=
reps=3
vocabs=()
xgrammar=1
bench_r=1
bench_r_n=16000
while [ $# -gt 0 ]; do
    case $1 in
    --no-xgrammar) xgrammar=0 && shift ;;
    --no-bench-r) bench_r=0 && shift ;;
    --every | --limit | --reps | --vocab | --bench-r-n)
        [ $# -ge 2 ] || die "$1 needs a value"
        case $1 in
        --every) every=$2 ;;
        --limit) limit=$2 ;;
        --reps) reps=$2 ;;
        --vocab) vocabs+=("$2") ;;
        --bench-r-n) bench_r_n=$2 ;;
        esac
        shift 2
        ;;
    *) die "usage: $0 [--every K] [--limit N] [--reps N] [--vocab NAME]... [--no-xgrammar] [--no-bench-r] [--bench-r-n N]" ;;
    esac
done
[ "${#vocabs[@]}" -gt 0 ] || vocabs=(gpt2 qwen2_5 llama3)

spider="$GRID_DATA/spider"
for f in "$spider/tables.json" "$spider/dev_gold_pg.sql"; do
    [ -f "$f" ] || die "missing $f: put the project's shared data at ../shared/data beside the repo"
done

say "bench: building grid (cargo build --release -p grid-cli)"
cargo build --release --quiet -p grid-cli
grid="${CARGO_TARGET_DIR:-target}/release/grid"
out_dir="${GRID_BENCH_OUT:-$(mktemp -d "${TMPDIR:-/tmp}/grid-bench.XXXXXX")}"
mkdir -p "$out_dir"
note "full outputs in $out_dir"

py=
if [ "$xgrammar" -eq 1 ]; then
    venv="${GRID_BENCH_VENV:-/tmp/grid-bench-venv}"
    if ! "$venv/bin/python" -c 'import xgrammar' 2>/dev/null; then
        say "bench: creating the XGrammar virtualenv in $venv"
        python3 -m venv "$venv"
        run_logged "pip install xgrammar==0.2.8" "$venv/bin/pip" install -q xgrammar==0.2.8
    fi
    py="$venv/bin/python"
fi

sample=(--every "$every" --reps "$reps")
[ -z "$limit" ] || sample+=(--limit "$limit")
summaries=()
for v in "${vocabs[@]}"; do
    tok="$GRID_DATA/tokenizers/$v"
    [ -e "$tok" ] || die "missing tokenizer $tok"
    common=(--tokenizer "$tok" --tables "$spider/tables.json" --gold "$spider/dev_gold_pg.sql")
    say "bench: $v: grid and llguidance"
    "$grid" bench "${common[@]}" "${sample[@]}" >"$out_dir/$v.bench.txt" 2>"$out_dir/$v.bench.err"
    cat "$out_dir/$v.bench.txt"
    summaries+=("$(tail -n 1 "$out_dir/$v.bench.txt")")
    if [ -n "$py" ]; then
        say "bench: $v: xgrammar"
        export_args=(--every "$every")
        [ -z "$limit" ] || export_args+=(--limit "$limit")
        "$grid" bench-export "${common[@]}" "${export_args[@]}" --out "$out_dir/$v.export" >/dev/null
        "$py" bench/peers/xgrammar_bench.py "$out_dir/$v.export" --reps "$reps" \
            >"$out_dir/$v.xgrammar.txt" 2>"$out_dir/$v.xgrammar.err"
        cat "$out_dir/$v.xgrammar.txt"
        summaries+=("$(tail -n 1 "$out_dir/$v.xgrammar.txt")")
    fi
    if [ "$bench_r" -eq 1 ]; then
        say "bench: $v: bench-r"
        "$grid" bench-r --tokenizer "$tok" --n "$bench_r_n" >"$out_dir/$v.bench-r.txt"
        cat "$out_dir/$v.bench-r.txt"
        summaries+=("$(tail -n 1 "$out_dir/$v.bench-r.txt")")
    fi
done

say "bench: host $(uname -srm), $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(nproc) cores; commit $(git rev-parse --short HEAD)"
say "bench: summaries"
printf '%s\n' "${summaries[@]}"
