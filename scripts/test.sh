#!/usr/bin/env bash
# `make test`: the suite on SQLite (embedded mode) and on PostgreSQL + Redis (distributed):
# pass 1 runs everything but the distributed tests; pass 2 runs the fast tests again on
# PostgreSQL plus the distributed ones (slow embedded-only tests run once, in pass 1; the
# no_services ones, the same in both, once in pass 2).
# The two passes share nothing (their own databases, Redis only in pass 2, free ports,
# peers' environments built under a file lock) and spend most of their time waiting on
# processes they boot, so they run side by side: pass 1 prints as it goes, pass 2 into
# .test-logs/pass2.log, printed when it ends. TEST_SERIAL=1 runs them one after the other.
# Uses TEST_DATABASE_URL / TEST_REDIS_URL when given; otherwise starts throwaway servers
# with scripts/services.sh if they are installed. With REQUIRE_SERVICES=1 (CI) a missing
# PostgreSQL or Redis fails the run instead of skipping the distributed tests.
set -euo pipefail
cd "$(dirname "$0")/.."
# --durations: each pass ends with its slowest tests, so a suite drifting toward the
# 25-minute budget shows where its time goes.
PYTEST=(.venv/bin/python -m pytest --durations=15 "$@")

started=""
if [ -z "${TEST_DATABASE_URL:-}" ] || [ -z "${TEST_REDIS_URL:-}" ]; then
  eval "$(scripts/services.sh start)"
  started=1
fi
pass2_pid=""
# The peers' own environments (a2a-sdk 0.3, ADK, Strands, LangGraph, the JS SDK...) are
# built side by side in the background from the start, not one by one by the first test
# that needs each (tests/support/prefetch_peers.py): minutes off a clean clone's run.
# Not for a run of chosen tests (arguments given), which may need none of them.
mkdir -p .test-logs
prefetch_pid=""
if [ $# -eq 0 ]; then
  env -u DATABASE_URL -u REDIS_URL .venv/bin/python -m tests.support.prefetch_peers \
    >.test-logs/prefetch.log 2>&1 &
  prefetch_pid=$!
fi
cleanup() {
  # Its pip or npm too (they would write on into .peers after its lock went).
  if [ -n "$prefetch_pid" ]; then
    pkill -P "$prefetch_pid" 2>/dev/null || true
    kill "$prefetch_pid" 2>/dev/null || true
  fi
  # An interrupted run interrupts pass 2 too, as Ctrl-C would: pytest tears its fixtures
  # down (the processes they booted) before it exits.
  if [ -n "$pass2_pid" ] && kill -INT -- "-$pass2_pid" 2>/dev/null; then
    for _ in $(seq 300); do kill -0 "$pass2_pid" 2>/dev/null || break; sleep 0.1; done
    kill -KILL -- "-$pass2_pid" 2>/dev/null || true
  fi
  if [ -n "$started" ]; then scripts/services.sh stop; fi
}
trap cleanup EXIT
# pytest answers Ctrl-C by exiting with status 2, not by dying of the signal, so bash would
# carry on: stop here instead (the EXIT trap then stops pass 2 and the servers).
trap 'exit 130' INT TERM

# Tests marked no_services read neither database nor Redis (settings read by fresh
# interpreters): the same in both passes, they run once, in pass 2, which has minutes to
# spare beside pass 1's live agents; in pass 1 only when there is no pass 2.
pass1() {
  env -u DATABASE_URL -u REDIS_URL "${PYTEST[@]}" -m "not postgres and not distributed$1"
}
pass2() {
  # Everything that needs no process boot, on PostgreSQL, plus the distributed tests. With
  # a SECRET_KEY of its own, as a deployment has: the public default's start-up warning
  # (platform_site/deploy_checks.py) would join the output the tests read of the
  # processes they boot.
  SECRET_KEY=${SECRET_KEY:-test-$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')} \
    DATABASE_URL=$TEST_DATABASE_URL REDIS_URL=$TEST_REDIS_URL "${PYTEST[@]}" \
    -m "not slow or postgres or distributed or no_services"
}

if [ -z "${TEST_DATABASE_URL:-}" ] || [ -z "${TEST_REDIS_URL:-}" ]; then
  echo "== pass 1: embedded mode (SQLite, in-process workers)"
  pass1 ""
  if [ "${REQUIRE_SERVICES:-}" = 1 ]; then
    echo "PostgreSQL and Redis are required (REQUIRE_SERVICES=1) but not available" >&2
    exit 1
  fi
  echo "== pass 2 skipped: PostgreSQL or Redis not installed"
  exit 0
fi

if [ "${TEST_SERIAL:-}" = 1 ]; then
  echo "== pass 1: embedded mode (SQLite, in-process workers)"
  pass1 " and not no_services"
  echo "== pass 2: distributed mode (PostgreSQL, Redis)"
  pass2
  exit 0
fi

log=.test-logs/pass2.log
echo "== pass 2: distributed mode (PostgreSQL, Redis), in the background into $log"
# Its own process group (job control on), so that cleanup can interrupt all of it.
set -m
pass2 >"$log" 2>&1 &
pass2_pid=$!
set +m
echo "== pass 1: embedded mode (SQLite, in-process workers)"
status1=0
pass1 " and not no_services" || status1=$?
status2=0
wait "$pass2_pid" || status2=$?
pass2_pid=""
echo "== pass 2: distributed mode (PostgreSQL, Redis)"
cat "$log"
echo "== pass 1 exit $status1, pass 2 exit $status2"
[ "$status1" = 0 ] && [ "$status2" = 0 ]
