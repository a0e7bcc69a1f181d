#!/usr/bin/env bash
# Fenced turns/s against the Redis ceiling, in alternating rounds: each round runs every variant
# once, in turn, the standard load (1,000 sessions x 20 turns, 50 callers, echo agent, one fenced
# runtime), and brackets each run with a ceiling run (ceiling.sh, 60,000 calls), so that a run's
# ratio is taken against the ceiling measured just before and just after it. Prints a line per
# round and, per variant, the median turns/s, the median ratio and the client's and Redis's CPU
# per turn (medians; the load's verification pass included).
# Usage: benches/redis/rounds.sh PORT ROUNDS 'NAME=COMMAND' ...   where COMMAND runs the load
# with the store URL and flags appended, e.g.
#   benches/redis/rounds.sh 6417 16 'default=target/release/turnstile' \
#     'one-thread=target/release/turnstile --worker-threads 1'
# Flushes the server's data: point it at a private redis-server (see docs/BENCHMARKS.md).
set -euo pipefail
usage() {
  echo "usage: $0 PORT ROUNDS 'NAME=COMMAND' ..." >&2
  exit 2
}
(($# >= 3)) || usage
here=$(cd "$(dirname "$0")" && pwd)
port=$1
rounds=$2
shift 2
[[ $rounds =~ ^[1-9][0-9]*$ ]] || usage
cli=(redis-cli -p "$port")

ceiling() {
  local out rate
  if ! out=$("$here/ceiling.sh" "$port" 60000 2>&1); then
    printf 'ceiling run failed:\n%s\n' "$out" >&2
    exit 1
  fi
  rate=$(tr '\r' '\n' <<< "$out" | grep -oE '[0-9.]+ requests per second' | tail -1 |
    cut -d' ' -f1 || true)
  [[ -n $rate ]] || { printf 'no rate in the ceiling run:\n%s\n' "$out" >&2; exit 1; }
  echo "$rate"
}
field() { grep -oE "\"$1\": *[0-9.]+" <<< "$2" | head -1 | grep -oE '[0-9.]+$' || true; }
redis_cpu() {
  "${cli[@]}" INFO cpu | tr -d '\r' | grep -E '^used_cpu_(sys|user):' | cut -d: -f2 |
    paste -sd+ | bc
}
median() { sort -g | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }

names=()
declare -A results
for variant in "$@"; do names+=("${variant%%=*}"); done
before=$(ceiling)
for ((round = 1; round <= rounds; round++)); do
  line="round $round:"
  for variant in "$@"; do
    name=${variant%%=*}
    command=${variant#*=}
    "${cli[@]}" FLUSHALL > /dev/null
    r0=$(redis_cpu)
    # shellcheck disable=SC2086 # the command is words on purpose
    if ! out=$( { /usr/bin/time -f 'CPU %U %S' $command load \
      --store "redis://127.0.0.1:$port/" --sessions 1000 --turns 20 --concurrency 50 \
      --agent echo --json --cluster 1; } 2>&1); then
      printf '%s: the load failed:\n%s\n' "$name" "$out" >&2
      exit 1
    fi
    r1=$(redis_cpu)
    after=$(ceiling)
    ok=$(field turns_ok "$out")
    lost=$(field lost "$out")
    if [[ $ok != 20000 || $lost != 0 ]]; then
      printf '%s: not every turn acknowledged and verified (ok=%s lost=%s):\n%s\n' \
        "$name" "$ok" "$lost" "$out" >&2
      exit 1
    fi
    tps=$(field turns_per_sec "$out")
    read -r _ user sys < <(grep '^CPU' <<< "$out")
    ratio=$(echo "scale=3; $tps / (($before + $after) / 2)" | bc | sed 's/^\./0./')
    client=$(echo "scale=1; ($user + $sys) * 1000000 / 20000" | bc)
    server=$(echo "scale=1; ($r1 - $r0) * 1000000 / 20000" | bc)
    results[$name]+="$tps $ratio $client $server"$'\n'
    line+=" $name=${tps%.*} (${ratio}x)"
    before=$after
  done
  echo "$line ceiling=${before%.*}"
done
for name in "${names[@]}"; do
  column() { awk -v c="$1" 'NF {print $c}' <<< "${results[$name]}" | median; }
  printf '%s: median %s turns/s, ratio %s, client %s us/turn, redis %s us/turn\n' \
    "$name" "$(column 1)" "$(column 2)" "$(column 3)" "$(column 4)"
done
