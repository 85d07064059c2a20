#!/bin/bash
# What protecting a link costs in CPU, on loopback TCP (local sockets off, TLS forced on where
# asked): two ranks all-reduce SIZE bytes ITERS times per run under each protection in turn,
# REPEAT runs each. Prints the median time per call, bus bandwidth, and the CPU seconds (user +
# system, both ranks and the coordinator) per GB that crossed the link, i.e. how many GB/s one
# core carries under that protection. Settings: SIZE=256M ITERS=8 REPEAT=3 BIN=build/bin
#   PROTECTIONS="tls=off,integrity=off tls=off,integrity=crc tls=off,integrity=mac tls=on"
#   OUT=perf/results/protection_loopback.md
set -eu
cd "$(dirname "$0")/../.."
size=${SIZE:-256M}
iters=${ITERS:-8}
repeat=${REPEAT:-3}
bin=${BIN:-build/bin}
out=${OUT:-perf/results/protection_loopback.md}
protections=${PROTECTIONS:-tls=off,integrity=off tls=off,integrity=crc tls=off,integrity=mac tls=on}
samples=$(mktemp)
trap 'rm -f "$samples"' EXIT
TIMEFORMAT='%U %S'
for ((i = 0; i < repeat; ++i)); do
  for protection in $protections; do
    flags=$(echo "$protection" | tr ',' '\n' | sed 's/^/--/' | tr '\n' ' ')
    # shellcheck disable=SC2086
    { cpu=$( { time "$bin/hmc-perf" -n 2 -c allreduce -b "$size" -e "$size" -i "$iters" -w 1 \
      --local_sockets=0 --streams=4 --algo=ring $flags > "$samples.run" 2>&1; } 2>&1); }
    row=$(awk '$1 ~ /^[0-9]+$/ && NF >= 8 { print $1, $5 / 1e6, $7 }' "$samples.run")
    # A 2-rank ring all-reduce sends SIZE bytes each way per call; warm-up included in the CPU.
    echo "$protection $row $cpu" | awk -v n=$((iters + 1)) \
      '{ gb = $2 * 2 * n / 1e9; print $1, $3, $4, ($5 + $6) / gb }' >> "$samples"
  done
done
rm -f "$samples.run"
median() { sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
{
  echo "### Loopback TCP, 2 ranks, 4 streams, ring all-reduce of $size, median of $repeat runs"
  echo
  echo "\`SIZE=$size ITERS=$iters REPEAT=$repeat perf/compare/protection_loopback.sh\`"
  echo
  echo "| protection | time per call (s) | busbw (GB/s) | CPU s per GB on the wire | GB/s per core |"
  echo "|---|---|---|---|---|"
  for protection in $protections; do
    t=$(awk -v p="$protection" '$1 == p { print $2 }' "$samples" | median)
    b=$(awk -v p="$protection" '$1 == p { print $3 }' "$samples" | median)
    c=$(awk -v p="$protection" '$1 == p { print $4 }' "$samples" | median)
    echo "| $protection | $t | $b | $(printf '%.3f' "$c") | $(awk -v c="$c" 'BEGIN { printf "%.2f", 1 / c }') |"
  done
  echo
} | tee -a "$out"
