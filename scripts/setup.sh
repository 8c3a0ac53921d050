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
#   - cargo-pgrx 0.18.0 (the version of the pgrx dependency; ~10 minutes);
#   - pgrx's configuration for PostgreSQL 15 (~/.pgrx/config.toml).
set -euo pipefail
# shellcheck source=scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

PGRX_VERSION=0.18.0
PG_MAJOR=15
PG_CONFIG="/usr/lib/postgresql/$PG_MAJOR/bin/pg_config"

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
command -v python3 >/dev/null 2>&1 || command -v jq >/dev/null 2>&1 || packages+=(python3)
ensure_apt_packages "${packages[@]}"
[ -x "$PG_CONFIG" ] || die "$PG_CONFIG not found after installing postgresql-server-dev-$PG_MAJOR"

say "setup: cargo-pgrx $PGRX_VERSION"
if [ "$(cargo pgrx --version 2>/dev/null || true)" = "cargo-pgrx $PGRX_VERSION" ]; then
    note "cargo-pgrx $PGRX_VERSION already installed"
else
    note "installing cargo-pgrx $PGRX_VERSION (takes about 10 minutes)"
    run_logged "cargo install cargo-pgrx" cargo install cargo-pgrx --version "$PGRX_VERSION" --locked
fi

say "setup: pgrx init for PostgreSQL $PG_MAJOR"
pgrx_config="${PGRX_HOME:-$HOME/.pgrx}/config.toml"
if [ -f "$pgrx_config" ] && grep -Eq "^[[:space:]]*pg${PG_MAJOR}[[:space:]]*=" "$pgrx_config"; then
    note "pg$PG_MAJOR already configured in $pgrx_config"
else
    run_logged "cargo pgrx init" cargo pgrx init "--pg$PG_MAJOR" "$PG_CONFIG"
fi
say "setup: done"
