#!/usr/bin/env bash
# Cold masks on wide schemas (issue 21): `grid bench` with GRID and llguidance in process,
# over never-seen statements on schemas shaped like real ones (bench/wide/make_wide.py:
# long mixed-case quoted names with spaces and units, 20-100 columns a table) plus the
# four widest Spider dev databases and their gold.
#
#   bash bench/wide.sh [--reps N] [--every K] [--vocab NAME]... [--seed N] [--dbs N] [--per-db N]
#
# Every repetition starts cold (`--cold-every-rep`): the engines are built afresh, so each
# database is met cold once per repetition and warm across its own statements, which is
# what the first questions on a new schema cost. A second run of the same sample is warm
# after its first repetition, for the warm figures. Defaults: 3 repetitions, every
# statement, the Qwen2.5 vocabulary (152k tokens). Outputs are kept in $GRID_BENCH_OUT
# (default: a fresh directory under ${TMPDIR:-/tmp}). Built with `--release`.
set -euo pipefail
# shellcheck source=scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../scripts/lib.sh"
cd "$GRID_ROOT"

reps=3
every=1
vocabs=()
gen=()
while [ $# -gt 0 ]; do
    case $1 in
    --reps | --every | --vocab | --seed | --dbs | --per-db)
        [ $# -ge 2 ] || die "$1 needs a value"
        case $1 in
        --reps) reps=$2 ;;
        --every) every=$2 ;;
        --vocab) vocabs+=("$2") ;;
        *) gen+=("$1" "$2") ;;
        esac
        shift 2
        ;;
    *) die "usage: $0 [--reps N] [--every K] [--vocab NAME]... [--seed N] [--dbs N] [--per-db N]" ;;
    esac
done
[ "${#vocabs[@]}" -gt 0 ] || vocabs=(qwen2_5)

spider="$GRID_DATA/spider"
[ -f "$spider/tables.json" ] || die "missing $spider/tables.json: put the project's shared data at ../shared/data beside the repo"

out_dir="${GRID_BENCH_OUT:-$(mktemp -d "${TMPDIR:-/tmp}/grid-wide.XXXXXX")}"
mkdir -p "$out_dir"
note "full outputs in $out_dir"
python3 bench/wide/make_wide.py --out "$out_dir/corpus" --spider "$spider" "${gen[@]}"

say "wide: building grid (cargo build --release -p grid-cli)"
cargo build --release --quiet -p grid-cli
grid="${CARGO_TARGET_DIR:-target}/release/grid"

summaries=()
for v in "${vocabs[@]}"; do
    tok="$GRID_DATA/tokenizers/$v"
    [ -e "$tok" ] || die "missing tokenizer $tok"
    common=(--tokenizer "$tok" --tables "$out_dir/corpus/tables.json" --gold "$out_dir/corpus/gold.tsv"
        --every "$every" --reps "$reps")
    say "wide: $v: cold per database, every repetition"
    "$grid" bench "${common[@]}" --cold-every-rep >"$out_dir/$v.cold.txt" 2>"$out_dir/$v.cold.err"
    cat "$out_dir/$v.cold.txt"
    summaries+=("$(tail -n 1 "$out_dir/$v.cold.txt")")
    say "wide: $v: cold first repetition, warm after"
    "$grid" bench "${common[@]}" >"$out_dir/$v.warm.txt" 2>"$out_dir/$v.warm.err"
    cat "$out_dir/$v.warm.txt"
    summaries+=("$(tail -n 1 "$out_dir/$v.warm.txt")")
    rejected=$(grep -c '"kind":"rejected"' "$out_dir/$v.cold.err" || true)
    [ "$rejected" -eq 0 ] || note "$v: $rejected refusals of a gold statement (see $out_dir/$v.cold.err)"
done

say "wide: host $(uname -srm), $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(nproc) cores; commit $(git rev-parse --short HEAD)"
say "wide: summaries"
printf '%s\n' "${summaries[@]}"
