#!/usr/bin/env bash
# A Citus cluster on loopback for tests and measurements: one coordinator and two workers,
# built by deploy/citus/build.sh, with Mneme's schema migrated and distributed by tenant.
#
# usage: deploy/citus/cluster.sh start|stop|urls
#   start  initialise (first time) and start the three nodes, create the database, roles and
#          extensions, run the migrations and distribute the tables (deploy/citus/distribute.sql)
#   stop   stop the three nodes (their data stays under $MNEME_CITUS_HOME/data)
#   urls   print the MNEME_CITUS_* variables the `citus` test marker and the benchmark read
#
# Ports: $MNEME_CITUS_PORT (coordinator, default 9700) and the next two for the workers.
# Trust authentication on 127.0.0.1 only: a throwaway cluster, never a deployment recipe.
set -euo pipefail

repo="$(cd "$(dirname "$0")/../.." && pwd)"
home="${MNEME_CITUS_HOME:-$repo/.citus}"
pg="$home/pgserver/pginstall"
data="$home/data"
base_port="${MNEME_CITUS_PORT:-9700}"
nodes=(coordinator worker1 worker2)
database=mneme
owner=mneme_owner
# initdb and postgres refuse to run as root; CI runs as root, so the nodes get their own user.
run_as_user="mneme-citus"

port_of() {
  case "$1" in
    coordinator) echo "$base_port" ;;
    worker1) echo $((base_port + 1)) ;;
    worker2) echo $((base_port + 2)) ;;
  esac
}

as_node_user() {
  if [ "$(id -u)" = 0 ]; then
    runuser -u "$run_as_user" -- "$@"
  else
    "$@"
  fi
}

psql_on() {
  local node="$1" db="$2"
  shift 2
  "$pg/bin/psql" --no-psqlrc --quiet --set ON_ERROR_STOP=1 \
    --host 127.0.0.1 --port "$(port_of "$node")" --username postgres --dbname "$db" "$@"
}

urls() {
  local port
  port="$(port_of coordinator)"
  echo "MNEME_CITUS_OWNER_URL=postgresql://$owner@127.0.0.1:$port/$database"
  echo "MNEME_CITUS_SUPERUSER_URL=postgresql://postgres@127.0.0.1:$port/$database"
  echo "MNEME_CITUS_APP_URL=postgresql://mneme_app@127.0.0.1:$port/$database"
}

init_node() {
  local node="$1" dir="$data/$1"
  [ -f "$dir/PG_VERSION" ] && return
  # One initdb, copied for every node: a fresh data directory is the same for all three until
  # its settings are appended below, and initdb is the slow part of a start from nothing.
  # (The copies share a system identifier, which only physical replication between them would
  # mind.) No sync: the cluster is throwaway and runs with fsync off.
  if [ ! -f "$data/initdb/PG_VERSION" ]; then
    as_node_user "$pg/bin/initdb" --pgdata "$data/initdb" --username postgres --auth trust \
      --encoding UTF8 --locale C.UTF-8 --no-sync >/dev/null
  fi
  as_node_user cp -a "$data/initdb" "$dir"
  cat >>"$dir/postgresql.conf" <<CONF
listen_addresses = '127.0.0.1'
port = $(port_of "$node")
unix_socket_directories = ''
shared_preload_libraries = 'citus'
max_connections = 200
max_prepared_transactions = 200
wal_level = logical
fsync = off
# SET LOCAL inside a transaction travels to every worker that transaction touches: how the
# tenant context (app.tenant_id) reaches the shards' row-level-security policies.
citus.propagate_set_commands = 'local'
# The service sets these per connection (start-up parameters, which Citus does not forward):
# the workers that hold the shards need them as their defaults to search the same way.
hnsw.iterative_scan = 'strict_order'
hnsw.ef_search = 100
jit = off
CONF
}

start() {
  [ -x "$pg/bin/postgres" ] && [ -f "$pg/lib/postgresql/citus.so" ] || {
    echo "no Citus build in $pg: run deploy/citus/build.sh first" >&2
    exit 1
  }
  if [ "$(id -u)" = 0 ] && ! id "$run_as_user" >/dev/null 2>&1; then
    useradd --system --no-create-home --shell /usr/sbin/nologin "$run_as_user"
  fi
  mkdir -p "$data"
  [ "$(id -u)" = 0 ] && chown "$run_as_user" "$data"
  for node in "${nodes[@]}"; do
    init_node "$node"
    if ! as_node_user "$pg/bin/pg_ctl" --pgdata "$data/$node" status >/dev/null 2>&1; then
      as_node_user "$pg/bin/pg_ctl" --pgdata "$data/$node" --log "$data/$node/server.log" \
        --wait --silent start
    fi
  done

  for node in "${nodes[@]}"; do
    if [ -z "$(psql_on "$node" postgres -tAc "SELECT 1 FROM pg_database WHERE datname = '$database'")" ]; then
      psql_on "$node" postgres -c "CREATE DATABASE $database"
    fi
    psql_on "$node" "$database" -c "CREATE EXTENSION IF NOT EXISTS citus"
  done
  psql_on coordinator "$database" <<SQL
SELECT citus_set_coordinator_host('127.0.0.1', $(port_of coordinator));
SELECT citus_add_node('127.0.0.1', $(port_of worker1));
SELECT citus_add_node('127.0.0.1', $(port_of worker2));
-- Created on the coordinator after the workers joined: Citus propagates both to them.
CREATE EXTENSION IF NOT EXISTS vector;
CREATE EXTENSION IF NOT EXISTS pg_trgm;
DO \$\$ BEGIN
  IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = '$owner') THEN
    CREATE ROLE $owner LOGIN;
  END IF;
END \$\$;
ALTER ROLE $owner CREATEROLE BYPASSRLS;
ALTER DATABASE $database OWNER TO $owner;
SQL

  local owner_url
  owner_url="postgresql://$owner@127.0.0.1:$(port_of coordinator)/$database"
  MNEME_DATABASE_URL="$owner_url" MNEME_MIGRATION_DATABASE_URL="$owner_url" mneme migrate
  psql_on coordinator "$database" --file "$repo/deploy/citus/distribute.sql"
  echo "citus cluster up: coordinator 127.0.0.1:$(port_of coordinator), workers" \
    "$(port_of worker1) and $(port_of worker2)"
}

stop() {
  for node in "${nodes[@]}"; do
    if [ -f "$data/$node/postmaster.pid" ]; then
      as_node_user "$pg/bin/pg_ctl" --pgdata "$data/$node" --wait --silent --mode fast stop
    fi
  done
}

case "${1:-}" in
  start) start ;;
  stop) stop ;;
  urls) urls ;;
  *) echo "usage: $0 start|stop|urls" >&2; exit 2 ;;
esac
