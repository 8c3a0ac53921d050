#!/usr/bin/env bash
# Timings of the llama backend (grid-endpoint --features llama) through the protocol on
# loopback, for Qwen2.5-Coder 0.5B and 1.5B (Q4_K_M, fetched by scripts/model.sh):
#
#   bash bench/llama.sh [--threads N] [MODEL ...]      (MODEL: a model.sh name or a .gguf)
#
# Per model and schema (a Spider-size one, a 24-table one): the time to the first token
# of a question on a new schema (the whole prompt evaluated) and of a second question on
# the same schema (its own tokens only, the schema's cells reused), prompt tokens per
# second, greedy generation under an open mask with and without overlap, and eight
# generations at once. One thread by default (on a 2-core machine two threads collapse
# generation when the other core is busy). Built with --profile ci (llama.cpp itself is
# built by cmake in Release either way). Timings need a quiet machine: the load average
# is printed before and after.
set -euo pipefail
# shellcheck source=scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../scripts/lib.sh"
cd "$GRID_ROOT"

threads=1
models=()
while [ $# -gt 0 ]; do
    case $1 in
    --threads)
        [ $# -ge 2 ] || die "--threads needs a value"
        threads=$2
        shift 2
        ;;
    *)
        models+=("$1")
        shift
        ;;
    esac
done
[ "${#models[@]}" -gt 0 ] || models=(qwen2.5-coder-0.5b qwen2.5-coder-1.5b)

say "bench: building the llama backend's bench"
cargo build -q -p grid-endpoint --features llama --profile ci --example llama_bench
bin="${CARGO_TARGET_DIR:-$GRID_ROOT/target}/ci/examples/llama_bench"

note "host: $(lscpu | sed -n 's/^Model name:[[:space:]]*//p'), $(nproc) cores; commit $(git rev-parse --short HEAD)"
for m in "${models[@]}"; do
    if [ -f "$m" ]; then path=$(bash scripts/model.sh --model "$m"); else path=$(bash scripts/model.sh "$m"); fi
    say "bench: $(basename "$path"), $threads thread(s); load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
    "$bin" "$path" "$threads"
    note "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
done
