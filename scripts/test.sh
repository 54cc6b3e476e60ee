#!/usr/bin/env bash
# `make test`: the suite on SQLite (embedded mode), then on PostgreSQL + Redis (distributed):
# pass 1 runs everything but the distributed tests; pass 2 runs the fast tests again on
# PostgreSQL plus the distributed ones (slow embedded-only tests run once, in pass 1).
# Uses TEST_DATABASE_URL / TEST_REDIS_URL when given; otherwise starts throwaway servers
# with scripts/services.sh if they are installed. With REQUIRE_SERVICES=1 (CI) a missing
# PostgreSQL or Redis fails the run instead of skipping the distributed tests.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTEST=(.venv/bin/python -m pytest "$@")

started=""
if [ -z "${TEST_DATABASE_URL:-}" ] || [ -z "${TEST_REDIS_URL:-}" ]; then
  eval "$(scripts/services.sh start)"
  started=1
fi
cleanup() { if [ -n "$started" ]; then scripts/services.sh stop; fi; }
trap cleanup EXIT

echo "== pass 1: embedded mode (SQLite, in-process workers)"
env -u DATABASE_URL -u REDIS_URL "${PYTEST[@]}" -m "not postgres and not distributed"

if [ -n "${TEST_DATABASE_URL:-}" ] && [ -n "${TEST_REDIS_URL:-}" ]; then
  # Everything that needs no process boot, on PostgreSQL, plus the distributed tests.
  echo "== pass 2: distributed mode (PostgreSQL, Redis)"
  DATABASE_URL=$TEST_DATABASE_URL REDIS_URL=$TEST_REDIS_URL "${PYTEST[@]}" \
    -m "not slow or postgres or distributed"
elif [ "${REQUIRE_SERVICES:-}" = 1 ]; then
  echo "PostgreSQL and Redis are required (REQUIRE_SERVICES=1) but not available" >&2
  exit 1
else
  echo "== pass 2 skipped: PostgreSQL or Redis not installed"
fi
