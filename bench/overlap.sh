#!/usr/bin/env bash
# An ask's time against the endpoint's own model time, with the endpoint pipelined (the
# forward pass of each sampled token runs while the ask computes its next mask) and
# without (`--no-overlap`): issue 21's "Overlap".
#
#   bash bench/overlap.sh [--model NAME|FILE.gguf] [--db SPIDER_DB] [--questions N] [--port P]
#                         [--concurrent C]
#   bash bench/overlap.sh --mock [FORWARD_MS MASK_MS STEPS]
#
# --mock times the structure alone, without a model: the forward mock's pass sleeps
# FORWARD_MS (default 50), the client takes MASK_MS (default 50) per mask, STEPS (default
# 40) steps pipelined and not (the `overlap_mock` example); pipelined, a step should cost
# about max(forward, mask) plus a round trip, otherwise their sum.
#
# Starts `grid-endpoint serve --backend llama --threads 1 --trace-steps` (one model
# thread, one CPU thread) on 127.0.0.1:P (default 55740), and asks the first N questions
# (default 4) of the Spider dev set on SPIDER_DB (default concert_singer) one at a time
# with `grid generate` (the ask pipeline grid.ask runs: the role's language, its masks,
# the checker; greedy, 96 tokens at most). Per ask, from the server's step trace:
#
#   steps     step requests of the ask (its generations; a repair adds one)
#   span      from the first step request's arrival to the last reply (ms)
#   model     the model thread's time inside that span: decoding, masking the logits row
#             and sampling of every step, plus the passes run ahead (ms)
#   overhead  span / model - 1: what the ask's side (mask computation, round trips, the
#             server's bookkeeping) adds to the model's time
#   wall      the `grid generate` process, start to end (ms): also its vocabulary fetch
#             and language build, which the extension's worker keeps across asks
#
# then the sums over the asks, once pipelined and once not. With --concurrent C, each arm
# then also asks C questions at once (the first C of SPIDER_DB's, reused in turn when it
# has fewer) in one `grid generate --n C`, which runs them together the way the
# extension's worker runs concurrent grid.ask calls: every tick's generations go to the
# server as one step request, which the backend decodes as one llama batch. Its row gives
# the same span, model and overhead over all the steps of the C asks. The model is
# Qwen2.5-Coder-0.5B (scripts/model.sh) unless --model says otherwise. Timings need a
# quiet machine: the load average is printed before and after.
set -euo pipefail
# shellcheck source=scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../scripts/lib.sh"
cd "$GRID_ROOT"

if [ "${1:-}" = --mock ]; then
    shift
    say "overlap: the forward mock (the overlap_mock example, --profile ci)"
    cargo build -q -p grid-endpoint --profile ci --example overlap_mock
    note "host: $(lscpu | sed -n 's/^Model name:[[:space:]]*//p'), $(nproc) cores; commit $(git rev-parse --short HEAD); load average $(cut -d' ' -f1-3 /proc/loadavg)"
    "${CARGO_TARGET_DIR:-target}/ci/examples/overlap_mock" "$@"
    exit 0
fi

model=qwen2.5-coder-0.5b
db=concert_singer
count=4
port=55740
concurrent=0
while [ $# -gt 0 ]; do
    case $1 in
    --model | --db | --questions | --port | --concurrent)
        [ $# -ge 2 ] || die "$1 needs a value"
        case $1 in
        --concurrent) concurrent=$2 ;;
        --model) model=$2 ;;
        --db) db=$2 ;;
        --questions) count=$2 ;;
        --port) port=$2 ;;
        esac
        shift 2
        ;;
    *) die "usage: $0 [--model NAME|FILE.gguf] [--db SPIDER_DB] [--questions N] [--port P] [--concurrent C]" ;;
    esac
done

spider="$GRID_DATA/spider"
for f in "$spider/tables.json" "$spider/dev.json"; do
    [ -e "$f" ] || die "missing $f: put the project's shared data at ../shared/data beside the repo"
done
command -v python3 >/dev/null 2>&1 || die "python3 is needed to read the questions and the trace"
if [ -f "$model" ]; then path=$(bash scripts/model.sh --model "$model"); else path=$(bash scripts/model.sh "$model"); fi

say "overlap: building grid-endpoint (feature llama) and grid (--profile ci)"
cargo build -q -p grid-endpoint --features llama --profile ci --bin grid-endpoint
cargo build -q -p grid-cli --profile ci
target="${CARGO_TARGET_DIR:-target}/ci"
work=$(mktemp -d "${TMPDIR:-/tmp}/grid-overlap.XXXXXX")
python3 - "$spider/dev.json" "$db" "$count" "$work" "$concurrent" <<'PY'
import json, sys
items = [it for it in json.load(open(sys.argv[1])) if it["db_id"] == sys.argv[2]]
n = int(sys.argv[3])
if not items:
    sys.exit(f"no dev questions on {sys.argv[2]}")
for i, it in enumerate(items[:n]):
    open(f"{sys.argv[4]}/q{i}.txt", "w").write(" ".join(it["question"].split()) + "\n")
# The concurrent asks' questions (not q*.txt: the sequential loop reads those).
with open(f"{sys.argv[4]}/together.questions", "w") as f:
    for it in items[:max(int(sys.argv[5]), 1)]:
        f.write(" ".join(it["question"].split()) + "\n")
PY

server_pid=
stop_server() {
    if [ -n "$server_pid" ]; then
        kill "$server_pid" 2>/dev/null || true
        wait "$server_pid" 2>/dev/null || true
        server_pid=
    fi
}
trap stop_server EXIT

note "host: $(lscpu | sed -n 's/^Model name:[[:space:]]*//p'), $(nproc) cores; commit $(git rev-parse --short HEAD); model $(basename "$path"); $db, $(ls "$work"/q*.txt | wc -l) questions"
for arm in pipelined no-overlap; do
    flags=(--trace-steps)
    [ "$arm" = no-overlap ] && flags+=(--no-overlap)
    log="$work/server.$arm.log"
    "$target/grid-endpoint" serve --backend llama --model "$path" --threads 1 \
        --listen "127.0.0.1:$port" "${flags[@]}" 2>"$log" &
    server_pid=$!
    for _ in $(seq 1 600); do
        grep -q "serving" "$log" 2>/dev/null && break
        kill -0 "$server_pid" 2>/dev/null || die "the server stopped: $(tail -3 "$log")"
        sleep 0.5
    done
    grep -q "serving" "$log" || die "the server did not start in 300 s"
    say "overlap: $arm; load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
    : >"$work/asks.$arm.tsv"
    for q in "$work"/q*.txt; do
        before=$(grep -c grid_endpoint_step "$log" || true)
        start=$(date +%s%N)
        "$target/grid" generate -e "http://127.0.0.1:$port" --tables "$spider/tables.json" \
            --db "$db" --questions "$q" --max-tokens 96 >"$q.$arm.out"
        end=$(date +%s%N)
        after=$(grep -c grid_endpoint_step "$log" || true)
        echo "$(basename "$q")	$before	$after	$(((end - start) / 1000000))" >>"$work/asks.$arm.tsv"
    done
    if [ "$concurrent" -gt 0 ]; then
        before=$(grep -c grid_endpoint_step "$log" || true)
        start=$(date +%s%N)
        "$target/grid" generate -e "http://127.0.0.1:$port" --tables "$spider/tables.json" \
            --db "$db" --questions "$work/together.questions" --n "$concurrent" --max-tokens 96 \
            >"$work/together.$arm.out"
        end=$(date +%s%N)
        after=$(grep -c grid_endpoint_step "$log" || true)
        echo "$concurrent at once	$before	$after	$(((end - start) / 1000000))" >>"$work/asks.$arm.tsv"
    fi
    stop_server
    note "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
    PYTHONPATH=bench/eval python3 - "$log" "$work/asks.$arm.tsv" "$arm" <<'PY'
import sys
from steptrace import span_and_model, steps as trace_steps
steps = trace_steps(sys.argv[1])
print(f"\n{sys.argv[3]}:\n")
print("| question | steps | span (ms) | model (ms) | overhead | wall (ms) |")
print("| --- | ---: | ---: | ---: | ---: | ---: |")
tot = [0, 0.0, 0.0, 0]
rows = [row.split("\t") for row in open(sys.argv[2])]
together = [r for r in rows if r[0].endswith(" at once")]
rows = [r for r in rows if not r[0].endswith(" at once")]
for q, a, b, wall in rows:
    mine = steps[int(a):int(b)]
    if not mine:
        print(f"| {q} | 0 | | | | {int(wall)} |")
        continue
    span, model = span_and_model(mine)
    print(f"| {q} | {len(mine)} | {span:.0f} | {model:.0f} | {span / model - 1:+.1%} | {int(wall)} |")
    tot = [tot[0] + len(mine), tot[1] + span, tot[2] + model, tot[3] + int(wall)]
if tot[2] > 0:
    print(f"| all | {tot[0]} | {tot[1]:.0f} | {tot[2]:.0f} | {tot[1] / tot[2] - 1:+.1%} | {tot[3]} |")
for q, a, b, wall in together:
    # One row over every step of the concurrent asks: a step request carries every
    # generation of its tick, so the span holds no idle time between asks.
    mine = steps[int(a):int(b)]
    if mine:
        span, model = span_and_model(mine)
        print(f"| {q} | {len(mine)} | {span:.0f} | {model:.0f} | {span / model - 1:+.1%} | {int(wall)} |")
PY
done
note "outputs in $work"
