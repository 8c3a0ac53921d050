#!/usr/bin/env bash
# First start of the container: the extension, and the endpoint and key from the
# environment (GRID_ENDPOINT, GRID_API_KEY), set cluster-wide by the superuser.
set -euo pipefail
psql -v ON_ERROR_STOP=1 -U "$POSTGRES_USER" -d postgres <<SQL
CREATE EXTENSION IF NOT EXISTS grid_pg;
ALTER SYSTEM SET grid.endpoint = '${GRID_ENDPOINT:-}';
ALTER SYSTEM SET grid.api_key = '${GRID_API_KEY:-}';
SELECT pg_reload_conf();
SQL
