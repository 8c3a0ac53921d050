#!/usr/bin/env bash
# First start of the container: the extension, the endpoint from the environment
# (GRID_ENDPOINT), and the API key from the secret file GRID_API_KEY_FILE (default
# /run/secrets/grid_api_key), set cluster-wide by the superuser.
#
# The key is copied into the data directory with mode 600 and named by
# grid.api_key_file: a key set with ALTER SYSTEM SET grid.api_key would be printed by
# PostgreSQL in the server log at reload.
set -euo pipefail
key_file=${GRID_API_KEY_FILE:-/run/secrets/grid_api_key}
stored=""
if [ -s "$key_file" ]; then
    stored="$PGDATA/grid_api_key"
    install -m 600 /dev/null "$stored"
    cat "$key_file" >"$stored"
fi
# psql variables (:'name') quote the values: nothing from the environment is spliced
# into SQL text.
psql -v ON_ERROR_STOP=1 -U "$POSTGRES_USER" -d postgres \
    -v endpoint="${GRID_ENDPOINT:-}" -v key_file="$stored" <<'SQL'
CREATE EXTENSION IF NOT EXISTS grid_pg;
SELECT pg_catalog.format('ALTER SYSTEM SET grid.endpoint = %L', :'endpoint') \gexec
SELECT pg_catalog.format('ALTER SYSTEM SET grid.api_key_file = %L', :'key_file')
 WHERE :'key_file' <> '' \gexec
SELECT pg_catalog.pg_reload_conf();
SQL
