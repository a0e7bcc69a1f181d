#!/usr/bin/env bash
# Soak: turnstile under churn for DURATION seconds (default 120), then a check that nothing
# acknowledged was lost, duplicated, reordered or falsely acknowledged.
#
#   scripts/soak.sh [DURATION]
#
# Each round (ROUND seconds, default 20) runs `turnstile load` against a private Redis with its
# AOF fsync'd on every write: far more sessions than the runtime's capacity (LRU eviction storms)
# and a short idle TTL, 30% of turns interrupted mid-stream, a store failing every 100th append,
# Redis killed with SIGKILL and restarted mid-round every other round, and the load process itself
# killed with SIGKILL at the end of the round. Every turn the runtime acknowledged is in that
# round's ack log (written before the caller moves on); at the end `turnstile sessions
# check-acks` reads every log against the store and exits non-zero on any fault.
#
# The runtime is driven in the load process (the same library `serve` runs), not over HTTP.
# Needs redis-server and redis-cli; uses $TURNSTILE_BIN (default: target/release/turnstile,
# else target/debug/turnstile), building it when neither exists.
set -euo pipefail
cd "$(dirname "$0")/.."

DURATION=${1:-120}
ROUND=${ROUND:-20}
if ! [[ "$DURATION" =~ ^[0-9]+$ ]] || (( DURATION < 1 )); then
  echo "usage: scripts/soak.sh [DURATION_SECONDS]" >&2
  exit 2
fi
BIN=${TURNSTILE_BIN:-}
if [ -z "$BIN" ]; then
  for candidate in target/release/turnstile target/debug/turnstile; do
    [ -x "$candidate" ] && BIN=$candidate && break
  done
fi
if [ -z "$BIN" ]; then
  cargo build --release --quiet
  BIN=target/release/turnstile
fi

work=$(mktemp -d)
redis_pid=""
load_pid=""
cleanup() {
  [ -n "$load_pid" ] && kill -9 "$load_pid" 2>/dev/null || true
  [ -n "$redis_pid" ] && kill -9 "$redis_pid" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

# A free loopback port: bind port 0 and read what the kernel chose.
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
url="redis://127.0.0.1:$port/"

start_redis() {
  redis-server --port "$port" --bind 127.0.0.1 --dir "$work" --save '' \
    --appendonly yes --appendfsync always >"$work/redis.log" 2>&1 &
  redis_pid=$!
  for _ in $(seq 1 100); do
    redis-cli -p "$port" ping >/dev/null 2>&1 && return 0
    sleep 0.1
  done
  echo "soak: redis-server did not answer on port $port" >&2
  exit 1
}

start_redis
round=0
end=$((SECONDS + DURATION))
while (( SECONDS < end )); do
  round=$((round + 1))
  left=$((end - SECONDS))
  this_round=$(( left < ROUND ? left : ROUND ))
  (( this_round < 2 )) && break
  "$BIN" load --store "$url" --sessions 400 --turns 100000 --concurrency 200 \
    --capacity 100 --idle-ttl 0.05 --agent mock --latency 1..5 --chunks 2 \
    --interrupt-rate 0.3 --fault-fail-every 100 --allow-failures 1 --progress never \
    --duration $((this_round + 30)) --ack-log "$work/acks-$round.log" \
    >"$work/load-$round.out" 2>&1 &
  load_pid=$!
  half=$((this_round / 2))
  sleep "$half"
  if (( round % 2 == 0 )); then
    kill -9 "$redis_pid"
    wait "$redis_pid" 2>/dev/null || true
    start_redis
  fi
  sleep $((this_round - half))
  kill -9 "$load_pid" 2>/dev/null || true
  wait "$load_pid" 2>/dev/null || true
  load_pid=""
  echo "soak: round $round: $(wc -l <"$work/acks-$round.log") turns acknowledged"
done

"$BIN" sessions --store "$url" check-acks "$work"/acks-*.log
