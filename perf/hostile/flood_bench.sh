#!/bin/sh
# A coordinator held by 1000 connections that never prove the token (hmc-flood: half silent,
# half dribbling garbage) while 8 ranks form a group and all-reduce ("flood"), against the same
# group with no flood ("quiet") and with the same flood aimed at a second coordinator that the
# group does not use ("decoy": what the flooding process itself costs this machine's cores). The
# three alternate, TRIALS times each (default 3). Prints, per run, how long the group took to
# form (ranks started to rank 0's first table row), the all-reduce's busbw and the coordinator's
# log lines, then the medians. Everything on 127.0.0.1; every process started is stopped by PID.
#   perf/hostile/flood_bench.sh [TRIALS] [BYTES]
set -eu
cd "$(dirname "$0")/../.."
trials=${1:-3}
bytes=${2:-16M}
bin=build/bin
out=$(mktemp -d)
token=$(head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n')
pids=""
cleanup() { for p in $pids; do kill "$p" 2>/dev/null || true; done; }
trap cleanup EXIT INT TERM

# await FILE PATTERN: until FILE has a line matching PATTERN (bounded: two minutes).
await() {
  for _ in $(seq 1 1200); do
    grep -q "$2" "$1" 2>/dev/null && return 0
    sleep 0.1
  done
  echo "timed out waiting for '$2' in $1" >&2
  return 1
}

run_once() {  # mode (quiet|flood) trial
  mode=$1 log=$out/$1-$2
  HMC_TOKEN=$token "$bin/hmc-coordinator" --bind=127.0.0.1:0 --world_size=8 \
    --address_file="$log.address" > "$log.coordinator" 2>&1 &
  coordinator=$!
  pids="$pids $coordinator"
  await "$log.address" .
  address=$(cat "$log.address")
  flood=""
  decoy=""
  target=$address
  if [ "$mode" = decoy ]; then
    HMC_TOKEN=$token "$bin/hmc-coordinator" --bind=127.0.0.1:0 --world_size=8 \
      --address_file="$log.decoy" > /dev/null 2>&1 &
    decoy=$!
    pids="$pids $decoy"
    await "$log.decoy" .
    target=$(cat "$log.decoy")
  fi
  if [ "$mode" != quiet ]; then
    "$bin/hmc-flood" --target="$target" --connections=1000 --seconds=600 > "$log.flood" 2>&1 &
    flood=$!
    pids="$pids $flood"
    await "$log.flood" holding
  fi
  start=$(date +%s.%N)
  ranks=""
  for r in 0 1 2 3 4 5 6 7; do
    HMC_TOKEN=$token HMC_COORDINATOR=$address HMC_RANK=$r HMC_PROBE=0 \
      "$bin/hmc-perf" -b "$bytes" -e "$bytes" -c allreduce -i 10 -w 2 > "$log.rank$r" 2>&1 &
    ranks="$ranks $!"
  done
  pids="$pids $ranks"
  await "$log.rank0" '^ *[0-9]'
  formed=$(date +%s.%N)
  for p in $ranks; do wait "$p"; done
  [ -n "$flood" ] && kill "$flood" 2>/dev/null
  [ -n "$decoy" ] && kill "$decoy" 2>/dev/null
  wait "$coordinator" 2>/dev/null || true
  busbw=$(awk '/^ *[0-9]/ {print $7}' "$log.rank0" | head -1)
  rejected=$(grep -c "rejected" "$log.coordinator" || true)
  printf '%-6s %5s %14.2f %10s %12s\n' "$mode" "$2" "$(awk -v a="$start" -v b="$formed" 'BEGIN {print b - a}')" "$busbw" \
    "$rejected"
}

printf '%-6s %5s %14s %10s %12s\n' mode trial "formed+1st(s)" "busbw" "log lines"
for t in $(seq 1 "$trials"); do
  run_once quiet "$t"
  run_once flood "$t"
  run_once decoy "$t"
done | tee "$out/table"
for mode in quiet flood decoy; do
  awk -v m="$mode" '$1 == m {print $3, $4}' "$out/table" | sort -n | awk -v m="$mode" \
    '{t[NR]=$1; b[NR]=$2} END {printf "median %-6s formed+first row %.2f s\n", m, t[int((NR+1)/2)]}'
  awk -v m="$mode" '$1 == m {print $4}' "$out/table" | sort -n | awk -v m="$mode" \
    '{b[NR]=$1} END {printf "median %-6s busbw %s GB/s\n", m, b[int((NR+1)/2)]}'
done
echo "logs: $out"
