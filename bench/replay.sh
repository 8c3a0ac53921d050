#!/usr/bin/env bash
# Replay the 1,034 Spider dev gold statements token by token through the mask, for each of
# the five shared vocabularies (`grid replay`), and print each vocabulary's summary line:
#
#   {"queries":N,"steps":N,"completeness_failures":N,"eos_failures":N,
#    "oracle_checked":N,"oracle_mismatches":N,"p50_us":x,"p90_us":x,"p99_us":x}
#
#   bash bench/replay.sh [--oracle-every N] [--limit N] [--vocab NAME]... [--show-failures N]
#
# Every N-th step (default 6) the mask is compared bit for bit with the brute-force oracle.
# The fewest steps of the five vocabularies is Llama-3's 32,380 (Qwen2.5 32,648, GPT-2
# 37,701, Llama-2 39,106, Mistral 41,576), so N = 6 checks at least 5,396 steps of each.
# Passes when every vocabulary has 0 completeness failures, 0 EOS failures, 0 oracle
# mismatches and (without --limit) at least 5,000 oracle-checked steps. Built with
# `--release`: the times are the benchmark. Each run's full output is kept in
# $GRID_REPLAY_OUT (default: a fresh directory under ${TMPDIR:-/tmp}).
set -euo pipefail
# shellcheck source=scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../scripts/lib.sh"
cd "$GRID_ROOT"

every=6
limit=
show=5
vocabs=()
while [ $# -gt 0 ]; do
    case $1 in
    --oracle-every | --limit | --vocab | --show-failures)
        [ $# -ge 2 ] || die "$1 needs a value"
        case $1 in
        --oracle-every) every=$2 ;;
        --limit) limit=$2 ;;
        --vocab) vocabs+=("$2") ;;
        --show-failures) show=$2 ;;
        esac
        shift 2
        ;;
    *) die "usage: $0 [--oracle-every N] [--limit N] [--vocab NAME]... [--show-failures N]" ;;
    esac
done
[ "${#vocabs[@]}" -gt 0 ] || vocabs=(gpt2 qwen2_5 llama3 llama2_sp mistral_sp_v3)

spider="$GRID_DATA/spider"
for f in "$spider/tables.json" "$spider/dev_gold_pg.sql"; do
    [ -f "$f" ] || die "missing $f: put the project's shared data at ../shared/data beside the repo"
done
ensure_json_reader

say "replay: building grid (cargo build --release -p grid-cli)"
cargo build --release --quiet -p grid-cli
grid="${CARGO_TARGET_DIR:-target}/release/grid"
out_dir="${GRID_REPLAY_OUT:-$(mktemp -d "${TMPDIR:-/tmp}/grid-replay.XXXXXX")}"
mkdir -p "$out_dir"
note "full outputs in $out_dir"

extra=()
[ -z "$limit" ] || extra=(--limit "$limit")
ok=1
summaries=()
for v in "${vocabs[@]}"; do
    tok="$GRID_DATA/tokenizers/$v"
    [ -e "$tok" ] || die "missing tokenizer $tok"
    out="$out_dir/$v.jsonl"
    say "replay: $v (--oracle-every $every${limit:+ --limit $limit})"
    start=$SECONDS
    rc=0
    "$grid" replay --tokenizer "$tok" --tables "$spider/tables.json" \
        --gold "$spider/dev_gold_pg.sql" --oracle-every "$every" "${extra[@]}" \
        >"$out" 2>"$out_dir/$v.err" || rc=$?
    summary=$(tail -n 1 "$out")
    note "grid exited $rc after $((SECONDS - start))s"
    summaries+=("$v $summary")
    if [ "$rc" -ne 0 ]; then
        note "$v: grid exited with status $rc"
        tail -n "$show" "$out_dir/$v.err" >&2 || true
        ok=0
        continue
    fi
    bad=0
    for k in completeness_failures eos_failures oracle_mismatches; do
        n=$(json_int "$k" "$summary") || {
            bad=1
            break
        }
        if [ "$n" -ne 0 ]; then
            note "$v: $k = $n"
            bad=1
        fi
    done
    checked=$(json_int oracle_checked "$summary") || bad=1
    if [ -z "$limit" ] && [ "${checked:-0}" -lt 5000 ]; then
        note "$v: only ${checked:-0} oracle-checked steps (need 5000)"
        bad=1
    fi
    if [ "$bad" -ne 0 ]; then
        ok=0
        if [ "$show" -gt 0 ] && [ "$(wc -l <"$out")" -gt 1 ]; then
            note "$v: first failure lines:"
            head -n -1 "$out" | head -n "$show"
        fi
    fi
done

say "replay: summaries"
printf '%s\n' "${summaries[@]}"
[ "$ok" -eq 1 ] || die "replay: failures (see above and $out_dir)"
say "replay: all vocabularies pass"
