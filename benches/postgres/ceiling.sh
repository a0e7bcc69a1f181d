#!/usr/bin/env bash
# The PostgreSQL ceiling for turnstile's durable turns: pgbench running the store's append
# statement (append.pgbench) with 50 clients, and the same work as a textbook multi-statement
# transaction (classic.pgbench), on the server at $PGURL (default the local test server).
# Usage: benches/postgres/ceiling.sh [SECONDS]   (see docs/BENCHMARKS.md, "PostgreSQL store")
set -euo pipefail
cd "$(dirname "$0")"
export PGOPTIONS="-c client_min_messages=warning"
url=${PGURL:-postgres://postgres@127.0.0.1:5432/test}
seconds=${1:-20}
echo "synchronous_commit = $(psql "$url" -Atc 'SHOW synchronous_commit')"
for script in append classic; do
  psql "$url" -q -f setup.sql
  echo "== $script.pgbench, 50 clients, ${seconds}s"
  pgbench -n -M prepared -c 50 -j 2 -T "$seconds" -f "$script.pgbench" "$url" \
    | grep -E '^(tps|latency average|number of transactions actually)'
done
psql "$url" -q -c 'DROP SCHEMA ceiling CASCADE'
