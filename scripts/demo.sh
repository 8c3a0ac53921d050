#!/usr/bin/env bash
# The main job, for now: build the `grid` command and parse all 1,034 gold
# queries of the Spider dev set, each under its own database's schema, with the
# project's PostgreSQL dialect grammar. Prints the summary and, if any line
# fails, the first failing lines. (This becomes a psql demo of grid.ask once the
# extension has it.)
#
# Needs only cargo (plus python3 or jq, installed when missing) and the shared
# data at ../shared/data beside the repo.
set -euo pipefail
# shellcheck source=scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$GRID_ROOT"

say "demo: setup"
command -v cargo >/dev/null 2>&1 || die "cargo not found: install Rust first (https://rustup.rs)"
ensure_json_reader
[ -d "$GRID_DATA/spider" ] || die "no Spider data at $GRID_DATA/spider: put the project's shared data at ../shared/data beside the repo"

exec bash scripts/spider-parse.sh --show-failures 10
