#!/usr/bin/env bash
# The Redis ceiling for turnstile's turns: redis-benchmark running the store's own append
# script (src/backend/redis/sessions/append.lua, EVALSHA) with 50 clients, 16 requests pipelined each,
# at the sizes a `turnstile load --agent echo` turn writes (two events, no checkpoint: the
# common append), each call on a fresh random session, so every call commits.
# Usage: benches/redis/ceiling.sh PORT [REQUESTS]   (see docs/BENCHMARKS.md, "Redis store,
# cluster layout"). Flushes the server's data: point it at a private redis-server.
set -euo pipefail
cd "$(dirname "$0")"
port=$1
requests=${2:-300000}
cli=(redis-cli -p "$port")
sha=$("${cli[@]}" SCRIPT LOAD "$(cat ../../src/backend/redis/sessions/append.lua)")
# Two events as `turnstile load --agent echo` writes them (178 and 200 bytes).
input='{"seq":41,"id":"60d22445-84e9-4961-a4fa-3608ff126c54","author":"user","at_ms":1796128421866,"kind":{"type":"user_input","text":"turn 20 of session 191","disposition":"answered"}}'
output='{"seq":42,"id":"5c1e8341-431f-4693-837b-c65e7e1124ff","author":"agent","at_ms":1796128421866,"kind":{"type":"agent_output","text":"turn 20 of session 191","status":{"status":"final"},"duration_ms":0}}'
"${cli[@]}" FLUSHALL > /dev/null
"${cli[@]}" CONFIG RESETSTAT > /dev/null
echo "== EVALSHA append.lua, 2 keys, 50 clients, -P 16, $requests calls"
redis-benchmark -p "$port" -c 50 -P 16 -n "$requests" -r 1000000000 -q \
  EVALSHA "$sha" 2 'ceiling:s:{__rand_int__}:h' 'ceiling:s:{__rand_int__}:l' \
  0 1f3a9c5e0b7d4e2a8c6f1b3d5e7a9c0b 1 1796128421866 43 0 '' '' '' "$input" "$output"
"${cli[@]}" INFO commandstats | grep -E '^cmdstat_evalsha'
"${cli[@]}" FLUSHALL > /dev/null
