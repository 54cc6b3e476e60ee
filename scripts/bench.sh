#!/usr/bin/env bash
# `make bench [BENCH=name] [ARGS="..."]`: bench/NAME.py (default dispatch) with ARGS. The
# distributed (PostgreSQL) modes need PostgreSQL and Redis: unless BENCH_DATABASE_URL and
# BENCH_REDIS_URL name running ones, throwaway servers are started on ports of their own
# (not the test suite's, which a test run may be using) and stopped at the end; where
# they are not installed, the scripts with modes run their embedded (SQLite) one only.
set -euo pipefail
cd "$(dirname "$0")/.."
name=${1:-dispatch}
shift || true
args=("$@")
if [ ! -f "bench/$name.py" ]; then
  echo "no benchmark bench/$name.py; scripts: $(grep -l __main__ bench/*.py | xargs -n1 basename | tr '\n' ' ')" >&2
  exit 2
fi
if [ -z "${BENCH_DATABASE_URL:-}" ] || [ -z "${BENCH_REDIS_URL:-}" ]; then
  export PG_PORT=${BENCH_PG_PORT:-54339} REDIS_PORT=${BENCH_REDIS_PORT:-63809}
  trap 'scripts/services.sh stop' EXIT
  services=$(scripts/services.sh start)
  if [[ $services == *TEST_DATABASE_URL* && $services == *TEST_REDIS_URL* ]]; then
    export BENCH_DATABASE_URL=postgres://postgres@127.0.0.1:$PG_PORT/platform_bench
    export BENCH_REDIS_URL=redis://127.0.0.1:$REDIS_PORT/2
  elif [[ " ${args[*]} " != *" --mode "* ]]; then
    case $name in
      dispatch | gateway) args+=(--mode embedded) ;;
      artifact_appends) args+=(--mode sqlite) ;;
    esac
    echo "PostgreSQL or Redis not installed: no distributed mode" >&2
  fi
fi
.venv/bin/python "bench/$name.py" "${args[@]}"
