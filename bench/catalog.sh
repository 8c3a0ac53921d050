#!/usr/bin/env bash
# grid_pg's own overhead on catalogs shaped like real ones (issue 34): hundreds to
# thousands of relations in many schemas and owners, wide tables, mixed-case names,
# foreign keys, comments, and roles granted differently. The model is the scripted mock
# (demo/script.json), whose own time is near zero, so what is timed is what grid_pg does
# around it: reading the snapshot as the asker, sending it to the worker, fingerprinting,
# the role's language and lexicons, the prompt.
#
#   bash bench/catalog.sh [--sizes 100,1000[,10000]] [--asks N] [--snapshots N] [--seed N]
#                         [--set NAME=VALUE]... [--tokenizer DIR] [--out DIR] [--keep]
#
# --sizes      relations per catalog (default 100,1000; 10,000 loads in minutes, add it
#              explicitly)
# --asks       warm asks per role and size (default 10)
# --snapshots  timed snapshot queries per role and size (default 5)
# --seed       the generator's seed (default 34): the same seed, the same catalog
# --out        results directory (default results/catalog-<time>, gitignored)
# --set        a grid setting for the bench's database (ALTER DATABASE ... SET), e.g.
#              --set grid.max_snapshot_size=12MB: by default an ask whose snapshot holds
#              more than 5,000 relations, 100,000 columns or 8 MB is refused (SQLSTATE
#              54000, docs/postgres.md), which the 10,000-relation catalog's roles reach
# --tokenizer  the mock's vocabulary (default builtin: bytes and SQL words, 337 tokens);
#              a real one (e.g. ../shared/data/tokenizers/qwen2_5, 152k tokens) makes the
#              worker's masks cost what they cost with a real model
# --keep       keep each cluster's data directory (it is removed after its size otherwise)
#
# Per size, a throwaway PostgreSQL 15 cluster (scripts/cluster.sh, one at a time) with the
# demo schema (demo/schema.sql: its employees and orders are what the scripted mock's
# answers name) and the generated catalog (bench/catalog/make_catalog.py: its head says
# what it holds), then per role (cat_all: everything; cat_two: two schemas; cat_cols: one
# schema and column grants in two more), each step in a NEW psql connection, as users pay:
#   snapshot   SELECT length(grid.catalog_snapshot()::text), --snapshots times
#   cold       the role's first ask after the catalog was created (the worker builds the
#              role's language and lexicons; the endpoint's vocabulary was fetched before,
#              by an ask of the demo's analyst, so it is not in this figure)
#   warm       --asks later asks, over the demo's questions
#   alter      the first ask after ALTER TABLE ... ADD COLUMN on a table of schema sales,
#              which all three roles read (a new snapshot, so a new fingerprint)
# and the snapshot's size, the relations and columns it holds, and the mask worker's RSS
# after the cold asks and after all of them. Every ask's outcome is classed (ok, refused,
# error, timeout) and printed: a refusal is a fine outcome for this bench (the mock can
# only write what each role's mask allows), an error or a timeout is not.
#
# Uses the extension as installed (this script installs nothing: say which build with
# the figures), and the reference endpoint: $GRID_ENDPOINT_BIN, or the first grid-endpoint
# found in ${CARGO_TARGET_DIR:-target}/{ci,release,debug}. Ports: $GRID_CATALOG_PORT
# (54391) for the cluster, $GRID_CATALOG_ENDPOINT_PORT (54392) for the endpoint. Writes
# under the results directory only; prints a markdown table at the end (also in
# DIR/summary.md), with the commit and the host.
set -euo pipefail
# shellcheck source=scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../scripts/lib.sh"
# shellcheck source=scripts/cluster.sh
source "$GRID_ROOT/scripts/cluster.sh"
cd "$GRID_ROOT"

PORT=${GRID_CATALOG_PORT:-54391}
ENDPOINT_PORT=${GRID_CATALOG_ENDPOINT_PORT:-54392}
ASK_TIMEOUT=${GRID_CATALOG_ASK_TIMEOUT:-300}
DB=grid_catbench
ROLES=(cat_all cat_two cat_cols)
# The demo's questions: the scripted mock has an answer for each (demo/script.json).
QUESTIONS=("How many employees work in each department?"
    "Show the three largest orders and who took them"
    "Which employee took the most orders?"
    "What is the total amount of orders per employee?"
    "How many employees work in Sales?")

sizes=100,1000
asks=10
snapshots=5
seed=34
out=""
keep=0
tokenizer=builtin
settings=()
while [ $# -gt 0 ]; do
    case $1 in
        --sizes | --asks | --snapshots | --seed | --out | --tokenizer)
            [ $# -ge 2 ] || die "$1 needs a value"
            case $1 in
                --sizes) sizes=$2 ;;
                --asks) asks=$2 ;;
                --snapshots) snapshots=$2 ;;
                --seed) seed=$2 ;;
                --out) out=$2 ;;
                --tokenizer) tokenizer=$2 ;;
            esac
            shift 2
            ;;
        --keep) keep=1; shift ;;
        --set)
            [ $# -ge 2 ] && [[ $2 =~ ^grid\.[a-z_]+=[A-Za-z0-9_.]+$ ]] || die "--set takes grid.NAME=VALUE"
            settings+=("$2")
            shift 2
            ;;
        *) die "unknown argument $1 (see the head of bench/catalog.sh)" ;;
    esac
done
[[ $sizes =~ ^[0-9]+(,[0-9]+)*$ ]] || die "--sizes takes numbers separated by commas, e.g. 100,1000,10000"
for n in $asks $snapshots $seed; do [[ $n =~ ^[0-9]+$ ]] || die "--asks, --snapshots, --seed take numbers"; done

# Prerequisites, each with what to do about it.
command -v python3 >/dev/null 2>&1 || die "python3 is needed to generate the catalogs"
command -v curl >/dev/null 2>&1 || die "curl is needed to wait for the endpoint"
[ -x "$PG_BIN/initdb" ] || die "PostgreSQL 15 is not installed in $PG_BIN (run scripts/setup.sh)"
ext_dir="$("$PG_BIN/pg_config" --sharedir)/extension"
[ -f "$ext_dir/grid_pg.control" ] || die "the extension is not installed in $ext_dir (cargo pgrx install --release)"
[ "$tokenizer" = builtin ] || [ -e "$tokenizer" ] || die "no tokenizer at $tokenizer"
if [ "$(id -u)" -eq 0 ]; then
    command -v sudo >/dev/null 2>&1 || die "as root, sudo is needed to run PostgreSQL as postgres"
fi
endpoint_bin=${GRID_ENDPOINT_BIN:-}
if [ -z "$endpoint_bin" ]; then
    for p in ci release debug; do
        cand="${CARGO_TARGET_DIR:-$GRID_ROOT/target}/$p/grid-endpoint"
        if [ -x "$cand" ]; then endpoint_bin=$cand; break; fi
    done
fi
[ -n "$endpoint_bin" ] && [ -x "$endpoint_bin" ] ||
    die "no grid-endpoint binary: cargo build --profile ci -p grid-endpoint, or set GRID_ENDPOINT_BIN"

out=${out:-$GRID_ROOT/results/catalog-$(date -u +%Y%m%d-%H%M%S)}
mkdir -p "$out"
out=$(cd "$out" && pwd)
commit=$(git rev-parse --short HEAD)
host="$(lscpu | sed -n 's/^Model name: *//p' | head -n 1), $(nproc) cores, $(free -g | awk '/^Mem:/ {print $2}') GiB"

dir=""
endpoint_pid=""
cleanup() {
    [ -n "$endpoint_pid" ] && kill "$endpoint_pid" 2>/dev/null || true
    if [ -n "$dir" ]; then
        cluster_stop "$dir"
        [ "$keep" -eq 1 ] || rm -rf "$dir/data"
    fi
}
trap cleanup EXIT

# One endpoint for every size: it is stateless across clusters, and each cluster's first
# ask (the demo analyst's) fetches its vocabulary before anything is timed.
say "catalog: results in $out; commit $commit; host $host; endpoint $endpoint_bin"
"$endpoint_bin" serve --backend mock --mock scripted --script demo/script.json \
    --tokenizer "$tokenizer" --listen "127.0.0.1:$ENDPOINT_PORT" >"$out/endpoint.log" 2>&1 &
endpoint_pid=$!
echo "$endpoint_pid" >"$out/endpoint.pid"
endpoint_wait "$out" "$ENDPOINT_PORT" catalog

now_ms() { echo $(($(date +%s%N) / 1000000)); }
# psql as ROLE, run directly (not through sudo as cluster_psql does when root) so that the
# timed connection is psql's alone; trust auth on the cluster's socket.
q() {
    local role=$1
    shift
    "$PG_BIN/psql" -X -h "$dir" -p "$PORT" -U "$role" -d "$DB" -v ON_ERROR_STOP=1 "$@"
}
# Nearest-rank p50, p90 and max of the numbers on stdin.
stats() { sort -n | awk '{v[NR]=$1} END {
    if (NR == 0) { print "- - -"; exit }
    a=int(NR*0.5); if (a<NR*0.5) a++; b=int(NR*0.9); if (b<NR*0.9) b++;
    printf "%d %d %d\n", v[a], v[b], v[NR] }'; }

# ask SIZE ROLE PHASE I QUESTION: one ask in a new connection; appends a row to asks.tsv
# (size, role, phase, i, ms, outcome, first error line) and prints it.
ask() {
    local size=$1 role=$2 phase=$3 i=$4 question=$5 t0 t1 rc=0 outcome err
    t0=$(now_ms)
    timeout "$ASK_TIMEOUT" "$PG_BIN/psql" -X -h "$dir" -p "$PORT" -U "$role" -d "$DB" -Atq \
        -v ON_ERROR_STOP=1 -c "SELECT grid.ask('${question//\'/\'\'}')" \
        >"$dir/ask.out" 2>"$dir/ask.err" || rc=$?
    t1=$(now_ms)
    err=$(grep -m1 'ERROR' "$dir/ask.err" | cut -c1-160 || true)
    if [ "$rc" -eq 0 ]; then
        outcome=ok
    elif [ "$rc" -eq 124 ]; then
        outcome=timeout
    elif grep -q 'not allowed for role' "$dir/ask.err"; then
        outcome=refused
    else
        outcome=error
    fi
    printf '%s\t%s\t%s\t%s\t%d\t%s\t%s\n' "$size" "$role" "$phase" "$i" "$((t1 - t0))" "$outcome" "$err" |
        tee -a "$out/asks.tsv" | sed 's/^/    /'
}
# The mask worker's resident set (MB): the child of this cluster's postmaster titled so.
worker_rss() {
    local pm
    pm=$(head -n 1 "$dir/data/postmaster.pid")
    ps --ppid "$pm" -o rss=,args= | awk '/grid_pg mask worker/ {printf "%d", $1 / 1024; f=1} END {if (!f) printf "-"}'
}

printf 'size\trole\tphase\ti\tms\toutcome\terror\n' >"$out/asks.tsv"
printf 'size\trole\trelations\tcolumns\tbytes\n' >"$out/snapshot.tsv"
printf 'size\tload_s\trss_cold_mb\trss_after_mb\tsize_s\n' >"$out/sizes.tsv"
printf 'size\trole\tms\n' >"$out/snapshot_ms.tsv"

IFS=, read -r -a size_list <<<"$sizes"
for size in "${size_list[@]}"; do
    size_t0=$SECONDS
    dir="$out/cluster-$size"
    say "catalog: $size relations: cluster in $dir (port $PORT)"
    cluster_start "$dir" "$PORT" "$DB"
    cluster_psql "$dir" "$PORT" postgres "$DB" -q -f - <demo/schema.sql >/dev/null
    cluster_psql "$dir" "$PORT" postgres "$DB" -q \
        -c "ALTER DATABASE $DB SET grid.endpoint = 'http://127.0.0.1:$ENDPOINT_PORT'"
    for kv in ${settings[@]+"${settings[@]}"}; do
        cluster_psql "$dir" "$PORT" postgres "$DB" -q -c "ALTER DATABASE $DB SET ${kv%%=*} = '${kv#*=}'"
    done
    # Before the catalog exists: the endpoint's vocabulary and the tables built over it,
    # which every role's language shares, so that the cold asks below are the role's own.
    ask "$size" analyst prime 0 "${QUESTIONS[0]}"

    say "catalog: $size relations: generate and load (seed $seed)"
    python3 bench/catalog/make_catalog.py --relations "$size" --seed "$seed" >"$dir/catalog.sql"
    t0=$SECONDS
    cluster_psql "$dir" "$PORT" postgres "$DB" -q -f - <"$dir/catalog.sql" >"$dir/load.log" 2>&1 ||
        { tail -n 20 "$dir/load.log" >&2; die "loading the $size-relation catalog failed (log: $dir/load.log)"; }
    # Statistics on the catalogs the snapshot query reads, as a DBA's autovacuum would have.
    cluster_psql "$dir" "$PORT" postgres "$DB" -q -c "ANALYZE pg_catalog.pg_class, pg_catalog.pg_attribute,
        pg_catalog.pg_namespace, pg_catalog.pg_constraint, pg_catalog.pg_description,
        pg_catalog.pg_depend, pg_catalog.pg_type, pg_catalog.pg_authid, pg_catalog.pg_auth_members"
    load_s=$((SECONDS - t0))
    note "loaded in ${load_s}s: $(cluster_psql "$dir" "$PORT" postgres "$DB" -Atq -c "SELECT count(*) FILTER (WHERE c.relkind IN ('r','v')) || ' relations, ' || (SELECT count(*) FROM pg_attribute a JOIN pg_class r ON r.oid = a.attrelid JOIN pg_namespace s ON s.oid = r.relnamespace WHERE a.attnum > 0 AND NOT a.attisdropped AND r.relkind IN ('r','v') AND s.nspname NOT IN ('pg_catalog','information_schema','grid','public')) || ' columns' FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname NOT IN ('pg_catalog','information_schema','grid','public','pg_toast')")"

    say "catalog: $size relations: each role's first ask (cold)"
    for role in "${ROLES[@]}"; do ask "$size" "$role" cold 1 "${QUESTIONS[0]} (cold)"; done
    rss_cold=$(worker_rss)

    say "catalog: $size relations: the snapshot as each role"
    for role in "${ROLES[@]}"; do
        facts=$(q "$role" -AtqF $'\t' -c "SELECT jsonb_array_length(s -> 'relations'),
                (SELECT coalesce(sum(jsonb_array_length(r -> 'columns')), 0)
                   FROM jsonb_array_elements(s -> 'relations') AS r),
                octet_length(s::text) FROM (SELECT grid.catalog_snapshot() AS s) AS x")
        printf '%s\t%s\t%s\n' "$size" "$role" "$facts" >>"$out/snapshot.tsv"
        for i in $(seq "$snapshots"); do
            t0=$(now_ms)
            q "$role" -Atq -c "SELECT length(grid.catalog_snapshot()::text)" >/dev/null
            printf '%s\t%s\t%d\n' "$size" "$role" "$(($(now_ms) - t0))" >>"$out/snapshot_ms.tsv"
        done
        note "$role: $(tr '\t' ' ' <<<"$facts" | awk '{printf "%d relations, %d columns, %d bytes", $1, $2, $3}');" \
            "snapshot ms: $(awk -F'\t' -v s="$size" -v r="$role" '$1==s && $2==r {printf "%s ", $3}' "$out/snapshot_ms.tsv")"
    done

    say "catalog: $size relations: $asks later asks per role (warm)"
    for role in "${ROLES[@]}"; do
        for i in $(seq "$asks"); do
            ask "$size" "$role" warm "$i" "${QUESTIONS[$(((i - 1) % ${#QUESTIONS[@]}))]} (#$i)"
        done
    done

    say "catalog: $size relations: ALTER TABLE ... ADD COLUMN in sales, then each role's first ask"
    target=$(cluster_psql "$dir" "$PORT" postgres "$DB" -Atq -c "SELECT c.oid::regclass FROM pg_class c
        JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = 'sales' AND c.relkind = 'r'
        ORDER BY c.relname LIMIT 1")
    cluster_psql "$dir" "$PORT" postgres "$DB" -q -c "ALTER TABLE $target ADD COLUMN bench_added_note text"
    note "altered $target"
    for role in "${ROLES[@]}"; do ask "$size" "$role" alter 1 "${QUESTIONS[0]} (after alter)"; done
    rss_after=$(worker_rss)
    cp "$dir/postgres.log" "$out/postgres-$size.log" 2>/dev/null || true
    cluster_stop "$dir"
    [ "$keep" -eq 1 ] || rm -rf "$dir/data" "$dir/catalog.sql"
    dir=""
    printf '%s\t%s\t%s\t%s\t%s\n' "$size" "$load_s" "$rss_cold" "$rss_after" "$((SECONDS - size_t0))" >>"$out/sizes.tsv"
    note "$size relations done in $((SECONDS - size_t0))s (load ${load_s}s); worker RSS ${rss_cold} MB after the cold asks, ${rss_after} MB after all"
done

# The summary: one markdown table of timings (p50/p90/max per size, role and step), one of
# what each role sees, both with the commit and the host.
{
    echo "bench/catalog.sh --sizes $sizes --asks $asks --snapshots $snapshots --seed $seed$([ "$tokenizer" = builtin ] || echo " --tokenizer $tokenizer")${settings[*]+ $(printf -- '--set %s ' "${settings[@]}")}"
    echo "commit $commit; host $host; load $(cut -d' ' -f1-3 /proc/loadavg); $(date -u +%Y-%m-%d)"
    echo "extension: as installed in $("$PG_BIN/pg_config" --pkglibdir) ($(date -u -r "$("$PG_BIN/pg_config" --pkglibdir)/grid_pg.so" +%Y-%m-%dT%H:%MZ)); endpoint: scripted mock, tokenizer $tokenizer; ms, one new psql connection each"
    echo
    echo "| relations | role | step | n | p50 | p90 | max | outcomes |"
    echo "|---:|---|---|---:|---:|---:|---:|---|"
    for size in "${size_list[@]}"; do
        for role in "${ROLES[@]}"; do
            read -r a b c < <(awk -F'\t' -v s="$size" -v r="$role" '$1==s && $2==r {print $3}' "$out/snapshot_ms.tsv" | stats)
            n=$(awk -F'\t' -v s="$size" -v r="$role" '$1==s && $2==r' "$out/snapshot_ms.tsv" | wc -l)
            echo "| $size | $role | snapshot query | $n | $a | $b | $c | |"
            for phase in cold warm alter; do
                rows=$(awk -F'\t' -v s="$size" -v r="$role" -v p="$phase" '$1==s && $2==r && $3==p' "$out/asks.tsv")
                [ -n "$rows" ] || continue
                read -r a b c < <(cut -f5 <<<"$rows" | stats)
                outcomes=$(cut -f6 <<<"$rows" | sort | uniq -c | awk '{printf "%s%s %d", (NR>1?", ":""), $2, $1}')
                case $phase in cold) label="first ask (cold)" ;; warm) label="later asks (warm)" ;;
                    alter) label="first ask after ADD COLUMN" ;; esac
                echo "| $size | $role | $label | $(wc -l <<<"$rows") | $a | $b | $c | $outcomes |"
            done
        done
    done
    echo
    echo "| relations | role | relations seen | columns seen | snapshot bytes | load s | worker RSS MB (after cold / after all) | size's run s |"
    echo "|---:|---|---:|---:|---:|---:|---|---:|"
    while IFS=$'\t' read -r size role rels cols bytes; do
        read -r load rc ra took < <(awk -F'\t' -v s="$size" '$1==s {print $2, $3, $4, $5}' "$out/sizes.tsv")
        echo "| $size | $role | $rels | $cols | $bytes | $load | $rc / $ra | $took |"
    done < <(tail -n +2 "$out/snapshot.tsv")
    # The questions differ in what the mock writes (a join of two tables costs more
    # steps than a count), so the warm asks by question: the mean of each's asks.
    echo
    echo "Later asks by question (mean ms; the outcome of the last when not ok):"
    for i in "${!QUESTIONS[@]}"; do echo "q$((i + 1)) \"${QUESTIONS[$i]}\"$([ "$i" -eq 0 ] && echo ' (also the cold and after-ADD-COLUMN asks)')"; done
    echo
    printf '| relations | role |'; for i in "${!QUESTIONS[@]}"; do printf ' q%d |' "$((i + 1))"; done; echo
    printf '|---:|---|'; for _ in "${QUESTIONS[@]}"; do printf -- '---:|'; done; echo
    for size in "${size_list[@]}"; do
        for role in "${ROLES[@]}"; do
            printf '| %s | %s |' "$size" "$role"
            for i in "${!QUESTIONS[@]}"; do
                awk -F'\t' -v s="$size" -v r="$role" -v k="$i" -v m="${#QUESTIONS[@]}" \
                    '$1==s && $2==r && $3=="warm" && ($4-1)%m==k {t+=$5; n++; o=$6}
                     END {if (n) printf " %d%s |", t/n, (o=="ok" ? "" : " " o); else printf " - |"}' "$out/asks.tsv"
            done
            echo
        done
    done
} >"$out/summary.md"
say "catalog: summary ($out/summary.md)"
cat "$out/summary.md"
bad=$(awk -F'\t' 'NR>1 && ($6=="error" || $6=="timeout")' "$out/asks.tsv" | wc -l)
[ "$bad" -eq 0 ] || note "$bad asks ended in an error or a timeout (see $out/asks.tsv)"
