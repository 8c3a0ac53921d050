#!/usr/bin/env bash
# Execution accuracy through grid.ask (issue 19): a throwaway cluster with grid_pg preloaded,
# each database of --schemas in its own schema with its own role, every question asked as
# that role in each arm, the prediction and the gold run read-only and compared the way
# Spider's execution evaluation compares them (bench/eval/compare.py).
#
#   bash bench/eval.sh [--model F.gguf | --endpoint URL | --mock-script FILE]
#                      [--questions FILE] [--schemas DIR] [--gold FILE]
#                      [--arms grid,grid-no-repair,unconstrained] [--every K] [--limit N]
#                      [--out results/F.jsonl] [--resume] [--no-install] [options of run.py]
#
# The model: --model starts `grid-endpoint serve --backend llama --model F --threads 1`
# (built with --features llama); with none of the three, the GGUF that
# `bash scripts/model.sh qwen2.5-coder-0.5b` prints. --endpoint uses a running endpoint as
# grid.endpoint (any grid-endpoint/1 URL, a stock OpenAI-compatible server as
# openai+http://host:port/v1?model=NAME&tokenizer=DIR, or mock:scripted:<file> for the
# in-process mock);
# --mock-script starts the reference endpoint's scripted mock on FILE (tokenizer
# $GRID_EVAL_TOKENIZER, default builtin).
# Data: --questions/--schemas default to Spider dev (../shared/data/spider: dev.json, the
# postgres/ dumps), with dev_gold_pg.sql as the gold.
# Every other option goes to bench/eval/run.py (--max-tokens, --ask-timeout,
# --statement-timeout, --skip-unavailable-arms, --examples, --withhold gold-tables,
# --concurrent N: N asks at once from N sessions, timed against the endpoint's step trace;
# see its --help). --keep keeps the cluster's directory (logs) after the run.
#
# Declines (issue 33): an ask that fails with P0002 is the model's decline, classed
# "declined", with a declined share per arm beside the refused share. --arms grid+decline
# asks with grid.decline = on (the prompt teaches the decline): on Spider dev its declines
# are false declines (goal: at most 1 %). --withhold gold-tables (an option of run.py)
# asks each question while its role may not read the tables its gold reads (REVOKEd
# before, GRANTed back after, checked in the catalog), so that it cannot be answered: no
# EX; per arm the declined (goal: at least 90 %), refused, answered-anyway and
# other-failure shares, and the questions skipped because their gold reads every table
# of its database. E.g.
#   bash bench/eval.sh --arms grid+decline --every 5 --out results/decline.jsonl
#   bash bench/eval.sh --arms grid+decline --withhold gold-tables --every 5 --out results/withheld.jsonl
#
# Builds and installs the extension (release) under /tmp/grid-pg-install.lock, held for the
# install and the cluster's start only; do not run this script under that lock yourself
# (--no-install: use the extension installed already, without the lock). Ports
# $GRID_EVAL_PORT (55600) and $GRID_EVAL_ENDPOINT_PORT (55601). Records stream to --out
# (default results/eval-<time>.jsonl); the summary ends with one JSON line, the last line
# of this script's output. `python3 bench/eval/run.py --report FILE` prints it again.
set -euo pipefail
# Read before the cd below: run from bench/, "$0" is "eval.sh".
self=$(realpath "${BASH_SOURCE[0]}")
# shellcheck source=scripts/lib.sh
source "$(dirname "$self")/../scripts/lib.sh"
# shellcheck source=scripts/cluster.sh
source "$GRID_ROOT/scripts/cluster.sh"
cd "$GRID_ROOT"

PORT=${GRID_EVAL_PORT:-55600}
ENDPOINT_PORT=${GRID_EVAL_ENDPOINT_PORT:-55601}
LOCK=/tmp/grid-pg-install.lock
# Where cargo puts its builds (the endpoint is run from there).
target=${CARGO_TARGET_DIR:-$GRID_ROOT/target}
spider="$GRID_DATA/spider"

model= endpoint= mock_script= questions= schemas= gold= install=1 keep=0
pass=()
while [ $# -gt 0 ]; do
    case $1 in
    --model | --endpoint | --mock-script | --questions | --schemas | --gold)
        [ $# -ge 2 ] || die "$1 needs a value"
        case $1 in
        --model) model=$2 ;;
        --endpoint) endpoint=$2 ;;
        --mock-script) mock_script=$(realpath "$2") ;;
        --questions) questions=$2 ;;
        --schemas) schemas=$2 ;;
        --gold) gold=$2 ;;
        esac
        shift 2
        ;;
    --no-install) install=0 && shift ;;
    --keep) keep=1 && shift ;;
    -h | --help)
        sed -n '2,/^set -euo/p' "$self" | sed '$d; s/^# \{0,1\}//'
        exit 0
        ;;
    *) pass+=("$1") && shift ;;
    esac
done
[ "$(printf '%s' "${model:+m}${endpoint:+e}${mock_script:+s}" | wc -c)" -le 1 ] ||
    die "give one of --model, --endpoint, --mock-script"

if [ -z "$questions" ]; then
    questions="$spider/dev.json"
    [ -n "$gold" ] || gold="$spider/dev_gold_pg.sql"
fi
[ -n "$schemas" ] || schemas="$spider/postgres"
for f in "$questions" "$schemas" ${gold:+"$gold"}; do
    [ -e "$f" ] || die "missing $f (Spider dev is read from $spider: put the project's shared data at ../shared/data)"
done
run_args=(--questions "$questions" --schemas "$schemas")
[ -z "$gold" ] || run_args+=(--gold "$gold")

# An --out that exists needs --resume: said before the cluster starts, not after.
for ((k = 0; k < ${#pass[@]}; k++)); do
    if [ "${pass[k]}" = --out ] && [ -e "${pass[k + 1]:-}" ] && [[ " ${pass[*]} " != *" --resume "* ]]; then
        die "${pass[k + 1]} exists: pass --resume to go on with it, or another --out"
    fi
done

venv=${GRID_EVAL_VENV:-${GRID_FAULTS_VENV:-/tmp/grid-faults-venv}}
ensure_py_venv "$venv"

# The endpoint binary, built before anything is started.
endpoint_cmd=()
if [ -n "$mock_script" ]; then
    run_logged "cargo build -p grid-endpoint" cargo build -p grid-endpoint
    endpoint_cmd=("$target/debug/grid-endpoint" serve --backend mock --mock scripted --script "$mock_script"
        --tokenizer "${GRID_EVAL_TOKENIZER:-builtin}")
    model_name="mock-scripted ($(basename "$mock_script"))"
elif [ -z "$endpoint" ]; then
    if [ -z "$model" ]; then
        [ -f scripts/model.sh ] || die "no --model, and scripts/model.sh (which fetches the default model) is not here yet"
        model=$(bash scripts/model.sh qwen2.5-coder-0.5b | tail -n 1)
    fi
    [ -f "$model" ] || die "model file $model not found"
    # Profile ci: the llama.cpp build the tests and the demo keep in target/ (release would
    # build llama.cpp a second time).
    run_logged "cargo build --profile ci -p grid-endpoint --features llama" \
        cargo build --profile ci -p grid-endpoint --features llama
    endpoint_cmd=("$target/ci/grid-endpoint" serve --backend llama --model "$model" --threads 1 --trace-steps)
    model_name=$(basename "$model")
fi

if [ "$install" -eq 1 ]; then
    bash scripts/setup.sh >/dev/null
    # Built outside the lock (minutes); installed under it with the cluster's start, so the
    # cluster loads this build and not one another checkout installs meanwhile.
    run_logged "cargo build -p grid_pg --release" \
        cargo build -p grid_pg --release --no-default-features --features pg15
fi

dir=$(mktemp -d /tmp/grid-eval.XXXXXX)
endpoint_pid=
cleanup() {
    [ -z "$endpoint_pid" ] || kill "$endpoint_pid" 2>/dev/null || true
    cluster_stop "$dir"
    [ "$keep" -eq 1 ] || rm -rf "$dir"
}
trap cleanup EXIT

if [ "${#endpoint_cmd[@]}" -gt 0 ]; then
    # Started first: a model takes a while to load, meanwhile the cluster starts.
    "${endpoint_cmd[@]}" --listen "127.0.0.1:$ENDPOINT_PORT" >"$dir/endpoint.log" 2>&1 &
    endpoint_pid=$!
    endpoint="http://127.0.0.1:$ENDPOINT_PORT"
fi

if [ "$install" -eq 1 ]; then
    exec {lockfd}>>"$LOCK"
    note "waiting for $LOCK" >&2
    flock -w 1800 "$lockfd" || die "$LOCK was held for 30 minutes (is this script running under it? it takes the lock itself)"
    run_logged "cargo pgrx install --release" as_root env PATH="$PATH" CARGO_HOME="${CARGO_HOME:-$HOME/.cargo}" \
        RUSTUP_HOME="${RUSTUP_HOME:-$HOME/.rustup}" PGRX_HOME="${PGRX_HOME:-$HOME/.pgrx}" \
        cargo pgrx install --release --package grid_pg --pg-config "$PG_BIN/pg_config"
    cluster_start "$dir" "$PORT" eval {lockfd}>&-
    flock -u "$lockfd"
    exec {lockfd}>&-
else
    cluster_start "$dir" "$PORT" eval
fi
chmod 755 "$dir"
note "cluster in $dir (port $PORT)" >&2

if [ -n "$endpoint_pid" ]; then
    for _ in $(seq 1200); do
        curl -fsS "$endpoint/v1/vocabulary" -o /dev/null 2>/dev/null && break
        kill -0 "$endpoint_pid" 2>/dev/null || { tail -n 30 "$dir/endpoint.log" >&2; die "the endpoint exited"; }
        sleep 0.5
    done
    curl -fsS "$endpoint/v1/vocabulary" -o /dev/null || die "the endpoint did not answer within 10 minutes"
    note "endpoint $endpoint (${endpoint_cmd[*]})" >&2
fi

rc=0
[ "${#endpoint_cmd[@]}" -eq 0 ] || run_args+=(--endpoint-trace "$dir/endpoint.log")
"$venv/bin/python" bench/eval/run.py --host "$dir" --port "$PORT" --db eval --endpoint "$endpoint" \
    ${model_name:+--model-name "$model_name"} "${run_args[@]}" "${pass[@]}" || rc=$?
exit "$rc"
