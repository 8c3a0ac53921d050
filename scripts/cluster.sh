#!/usr/bin/env bash
# Throwaway PostgreSQL clusters (15 by default, or 18) with the mask worker preloaded, for
# the demo and the fault suite. Source it (after scripts/lib.sh), then:
#
#   cluster_use_pg MAJOR          use PostgreSQL MAJOR's programs (15: Debian's, 18: the
#                                 wheel scripts/setup.sh installs): sets PG_MAJOR, PG_BIN
#
#   cluster_start DIR PORT DB     initdb in DIR/data (as postgres), grid_pg preloaded with
#                                 grid.database = DB, socket in DIR, database DB created
#                                 with the extension installed
#   cluster_psql DIR PORT USER DB [psql args...]
#   cluster_stop DIR              stop it (fast)
#   endpoint_wait DIR PORT WHAT   wait (up to 2 minutes) until the endpoint whose pid is in
#                                 DIR/endpoint.pid answers on PORT; if it exits, print
#                                 DIR/endpoint.log and die, naming WHAT
#
# Needs the extension installed (cargo pgrx install) and sudo when run as root.
PG_MAJOR=15
PG_BIN=${PG_BIN:-/usr/lib/postgresql/15/bin}

cluster_use_pg() {
    PG_MAJOR=$1
    PG_BIN=$(pg_bin "$1")
    [ -x "$PG_BIN/postgres" ] || die "PostgreSQL $1 is not installed in $PG_BIN (run scripts/setup.sh)"
}

as_postgres() { if [ "$(id -u)" -eq 0 ]; then sudo -u postgres "$@"; else "$@"; fi; }

cluster_start() {
    local dir=$1 port=$2 db=$3
    mkdir -p "$dir"
    chmod 755 "$dir"
    chown postgres: "$dir" 2>/dev/null || true
    as_postgres "$PG_BIN/initdb" -D "$dir/data" --auth=trust -U postgres >"$dir/initdb.log" 2>&1 \
        || { cat "$dir/initdb.log"; return 1; }
    cat >>"$dir/data/postgresql.conf" <<CONF
port = $port
listen_addresses = ''
unix_socket_directories = '$dir'
shared_preload_libraries = 'grid_pg'
grid.database = '$db'
max_connections = 100
CONF
    as_postgres "$PG_BIN/pg_ctl" -D "$dir/data" -l "$dir/postgres.log" -w start >/dev/null
    as_postgres "$PG_BIN/createdb" -h "$dir" -p "$port" -U postgres "$db"
    as_postgres "$PG_BIN/psql" -X -q -h "$dir" -p "$port" -U postgres -d "$db" -c "CREATE EXTENSION grid_pg"
}

cluster_psql() {
    local dir=$1 port=$2 user=$3 db=$4
    shift 4
    as_postgres "$PG_BIN/psql" -X -h "$dir" -p "$port" -U "$user" -d "$db" -v ON_ERROR_STOP=1 "$@"
}

cluster_stop() {
    as_postgres "$PG_BIN/pg_ctl" -D "$1/data" stop -m fast >/dev/null 2>&1 || true
}

endpoint_wait() {
    local dir=$1 port=$2 what=$3
    for _ in $(seq 600); do
        curl -fsS "http://127.0.0.1:$port/v1/vocabulary" >/dev/null 2>&1 && break
        kill -0 "$(cat "$dir/endpoint.pid")" 2>/dev/null || {
            cat "$dir/endpoint.log" >&2
            die "$what: the endpoint exited (log above)"
        }
        sleep 0.2
    done
}
