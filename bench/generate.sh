#!/usr/bin/env bash
# 1,000 mock asks over the Spider dev schemas (`grid generate`: the ask pipeline grid.ask
# runs, with the checker's repair), each run's audit log then checked with `grid audit
# verify` and `grid audit replay`:
#
#   bash bench/generate.sh [--seed S] [--per-db N] [--cli-replay-every K]
#
# For each of the 20 dev databases, with a select-only policy and GPT-2's vocabulary,
# four runs (N = 50 asks per database by default, split 15/10/15/10): the scripted
# mock (its script is the dev questions and their PostgreSQL gold SQL) with a budget of
# 96 tokens and with a small one (14), and the adversarial mock with budgets of 16 and 64.
# Seeds are random (from --seed, printed, so a run can be repeated). The runs' summary
# lines are summed into one:
#
#   {"asks":N,"answered":N,"refused":N,"declined":N,"failed":N,"generations":N,"parsed":N,"dead_ends":N,
#    "budget_completed":N,"forbidden_emitted":N,"audit_verified":N,"replayed_identical":N,
#    "cli_verified_logs":N,"cli_replayed_logs":N}
#
# Passes when every generation parses, with 0 dead ends and 0 forbidden lexemes, every
# generation's chain verifies and every mask replays bit for bit (in `grid generate`,
# from the log read back), and `grid audit verify` / `grid audit replay` accept every
# log (`replay` on every K-th log, default every one). Built with `--profile ci`: this is
# a correctness run, not a timing. Outputs are kept in $GRID_GENERATE_OUT (default: a
# fresh directory under ${TMPDIR:-/tmp}).
set -euo pipefail
# shellcheck source=scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../scripts/lib.sh"
cd "$GRID_ROOT"

seed=$(od -An -N4 -tu4 /dev/urandom | tr -d ' ')
per_db=50
replay_every=1
while [ $# -gt 0 ]; do
    case $1 in
    --seed | --per-db | --cli-replay-every)
        [ $# -ge 2 ] || die "$1 needs a value"
        case $1 in
        --seed) seed=$2 ;;
        --per-db) per_db=$2 ;;
        --cli-replay-every) replay_every=$2 ;;
        esac
        shift 2
        ;;
    *) die "usage: $0 [--seed S] [--per-db N] [--cli-replay-every K]" ;;
    esac
done

spider="$GRID_DATA/spider"
tok="$GRID_DATA/tokenizers/gpt2"
for f in "$spider/tables.json" "$spider/dev.json" "$spider/dev_gold_pg.sql" "$tok"; do
    [ -e "$f" ] || die "missing $f: put the project's shared data at ../shared/data beside the repo"
done
command -v python3 >/dev/null 2>&1 || die "python3 is needed to split the questions and sum the results"

say "generate: building grid (cargo build --profile ci -p grid-cli)"
cargo build --profile ci --quiet -p grid-cli
grid="${CARGO_TARGET_DIR:-target}/ci/grid"
out_dir="${GRID_GENERATE_OUT:-$(mktemp -d "${TMPDIR:-/tmp}/grid-generate.XXXXXX")}"
mkdir -p "$out_dir"
note "seed $seed; outputs in $out_dir"
echo '{"verbs":["select"]}' >"$out_dir/policy.json"

# One questions file per database, in dev.json order.
python3 - "$spider/dev.json" "$out_dir" <<'PY'
import json, sys
items = json.load(open(sys.argv[1]))
by = {}
for it in items:
    by.setdefault(it["db_id"], []).append(" ".join(it["question"].split()))
for db, qs in by.items():
    open(f"{sys.argv[2]}/questions.{db}.txt", "w").write("\n".join(qs) + "\n")
open(f"{sys.argv[2]}/dbs.txt", "w").write("\n".join(sorted(by)) + "\n")
PY

# (endpoint, max tokens, share of the per-database count in 50ths)
runs=("mock:scripted 96 15" "mock:scripted 14 10" "mock:adversarial 16 15" "mock:adversarial 64 10")
k=0
verified=0
replayed=0
replay_logs=0
logs=0
start=$SECONDS
while read -r db; do
    for r in "${runs[@]}"; do
        read -r endpoint budget share <<<"$r"
        n=$((per_db * share / 50))
        [ "$n" -gt 0 ] || continue
        k=$((k + 1))
        base="$out_dir/run$k.$db.${endpoint#mock:}.$budget"
        "$grid" generate --endpoint "$endpoint" --tokenizer "$tok" --tables "$spider/tables.json" \
            --db "$db" --policy "$out_dir/policy.json" --questions "$out_dir/questions.$db.txt" \
            --n "$n" --seed $((seed + k)) --max-tokens "$budget" --audit-out "$base.audit.jsonl" \
            >"$base.out" 2>"$base.err" || die "grid generate failed for $base (see $base.err)"
        logs=$((logs + 1))
        if "$grid" audit verify "$base.audit.jsonl" >"$base.verify" 2>&1; then
            verified=$((verified + 1))
        else
            note "audit verify FAILED: $base.audit.jsonl"
        fi
        if [ $((k % replay_every)) -eq 0 ]; then
            replay_logs=$((replay_logs + 1))
            if "$grid" audit replay "$base.audit.jsonl" >"$base.replay" 2>&1; then
                replayed=$((replayed + 1))
            else
                note "audit replay FAILED: $base.audit.jsonl"
            fi
        fi
        note "$db $endpoint --max-tokens $budget: $(tail -n 1 "$base.out")"
    done
done <"$out_dir/dbs.txt"
note "done in $((SECONDS - start))s"

total=$(python3 - "$out_dir" "$verified" "$replayed" <<'PY'
import glob, json, sys
keys = ["asks", "answered", "refused", "declined", "failed", "generations", "parsed", "dead_ends",
        "budget_completed", "forbidden_emitted", "audit_verified", "replayed_identical"]
tot = dict.fromkeys(keys, 0)
for f in sorted(glob.glob(f"{sys.argv[1]}/run*.out")):
    last = json.loads(open(f).read().splitlines()[-1])
    for k in keys:
        tot[k] += last[k]
tot["cli_verified_logs"] = int(sys.argv[2])
tot["cli_replayed_logs"] = int(sys.argv[3])
print(json.dumps(tot, separators=(",", ":")))
PY
)
say "generate: $logs logs ($replay_logs replayed with grid audit replay)"
echo "$total"
python3 - "$total" "$logs" "$replay_logs" <<'PY' || die "generation run FAILED"
import json, sys
t, logs, replay_logs = json.loads(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
g = t["generations"]
ok = (t["parsed"] == g and t["dead_ends"] == 0 and t["forbidden_emitted"] == 0
      and t["audit_verified"] == g and t["replayed_identical"] == g
      and t["cli_verified_logs"] == logs and t["cli_replayed_logs"] == replay_logs)
sys.exit(0 if ok else 1)
PY
say "generate: PASS"
