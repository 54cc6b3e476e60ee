#!/usr/bin/env bash
# Start or stop a throwaway PostgreSQL and Redis on loopback for the test suite.
#   scripts/services.sh start   -> prints `export TEST_DATABASE_URL=... TEST_REDIS_URL=...`
#   scripts/services.sh stop
# PostgreSQL refuses to run as root, so as root the cluster runs as the `postgres` user.
set -euo pipefail

PG_BIN=${PG_BIN:-$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)}
PG_PORT=${PG_PORT:-54329}
REDIS_PORT=${REDIS_PORT:-63799}
STATE=${SERVICES_DIR:-/tmp/a2a-platform-services-$PG_PORT}

as_pg() {
  if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}

start() {
  mkdir -p "$STATE"
  if [ -n "$PG_BIN" ] && [ -x "$PG_BIN/initdb" ]; then
    if [ "$(id -u)" = 0 ]; then chown postgres "$STATE"; fi
    if [ ! -f "$STATE/pg/PG_VERSION" ]; then
      as_pg "$PG_BIN/initdb" -D "$STATE/pg" -U postgres --auth=trust -E UTF8 >"$STATE/initdb.log" 2>&1
    fi
    if ! as_pg "$PG_BIN/pg_ctl" -D "$STATE/pg" status >/dev/null 2>&1; then
      as_pg "$PG_BIN/pg_ctl" -D "$STATE/pg" -l "$STATE/pg.log" -w -t 60 start \
        -o "-h 127.0.0.1 -p $PG_PORT -k $STATE -c fsync=off -c synchronous_commit=off -c full_page_writes=off -c max_connections=300" >/dev/null
    fi
    as_pg "$PG_BIN/psql" -h 127.0.0.1 -p "$PG_PORT" -U postgres -tAc \
      "SELECT 1 FROM pg_database WHERE datname='platform'" | grep -q 1 ||
      as_pg "$PG_BIN/createdb" -h 127.0.0.1 -p "$PG_PORT" -U postgres platform
    echo "export TEST_DATABASE_URL=postgres://postgres@127.0.0.1:$PG_PORT/platform"
  else
    echo "# PostgreSQL not installed (no initdb found)" >&2
  fi
  if command -v redis-server >/dev/null; then
    if ! redis-cli -p "$REDIS_PORT" ping >/dev/null 2>&1; then
      redis-server --bind 127.0.0.1 --port "$REDIS_PORT" --save '' --appendonly no \
        --daemonize yes --pidfile "$STATE/redis.pid" --logfile "$STATE/redis.log" --dir "$STATE"
      for _ in $(seq 50); do redis-cli -p "$REDIS_PORT" ping >/dev/null 2>&1 && break; sleep 0.1; done
    fi
    echo "export TEST_REDIS_URL=redis://127.0.0.1:$REDIS_PORT/0"
  else
    echo "# Redis not installed (no redis-server found)" >&2
  fi
}

stop() {
  if [ -n "$PG_BIN" ] && [ -f "$STATE/pg/PG_VERSION" ]; then
    as_pg "$PG_BIN/pg_ctl" -D "$STATE/pg" -m fast -w stop >/dev/null 2>&1 || true
  fi
  if [ -f "$STATE/redis.pid" ]; then
    redis-cli -p "$REDIS_PORT" shutdown nosave >/dev/null 2>&1 || kill "$(cat "$STATE/redis.pid")" 2>/dev/null || true
  fi
}

case "${1:-}" in
  start) start ;;
  stop) stop ;;
  *) echo "usage: $0 start|stop" >&2; exit 2 ;;
esac
