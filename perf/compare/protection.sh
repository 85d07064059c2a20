#!/bin/sh
# What protecting the links costs on one emulated topology: an all-reduce with TLS 1.3, with
# sealed frames (integrity=mac, the default without TLS) and with nothing, side by side. The
# protection belongs to the connections, so each is its own hmc-perf group; they take turns,
# REPEAT times, and the table gives each one's median time per size and its ratio to nothing.
#   perf/compare/protection.sh TOPOLOGY
#   e.g. perf/compare/protection.sh perf/topologies/us-eu.topo
# Settings (environment): SIZES="64M 256M" REPEAT=3 ROUNDS=3 WARMUP=1 SCALE=0.05 MTU=9000
#   OUT=perf/results/protection.md BIN=build/bin TCP=cubic
#   PROTECTIONS="tls=off,integrity=off tls=off,integrity=mac tls=on" (the first is the baseline)
# Needs root (hmc-wanem).
set -eu
cd "$(dirname "$0")/../.."
topology=$1
sizes=${SIZES:-64M 256M}
repeat=${REPEAT:-3}
scale=${SCALE:-0.05}
out=${OUT:-perf/results/protection.md}
bin=${BIN:-build/bin}
protections=${PROTECTIONS:-tls=off,integrity=off tls=off,integrity=mac tls=on}
prefix=hmcs
samples=$(mktemp)
trap '$bin/hmc-wanem down --prefix=$prefix > /dev/null 2>&1; rm -f "$samples"' EXIT
$bin/hmc-wanem down --prefix=$prefix > /dev/null 2>&1 || true
$bin/hmc-wanem up "$topology" --prefix=$prefix --scale="$scale" --mtu="${MTU:-9000}" > /dev/null
i=0
while [ "$i" -lt "$repeat" ]; do
  for size in $sizes; do
    for protection in $protections; do
      flags=$(echo "$protection" | tr ',' '\n' | sed 's/^/--/' | tr '\n' ' ')
      # shellcheck disable=SC2086
      table=$(perf/wanem/run.sh $prefix "$bin/hmc-perf" -c allreduce -b "$size" -e "$size" \
        -i "${ROUNDS:-3}" -w "${WARMUP:-1}" --tcp_congestion="${TCP:-cubic}" $flags 2>&1) || {
        echo "protection.sh: hmc-perf failed ($protection, $size):" >&2
        echo "$table" | tail -5 >&2
        exit 1
      }
      echo "$table" | awk -v p="$protection" -v s="$size" \
        '$1 ~ /^[0-9]+$/ && NF >= 8 { print p, s, $5 / 1e6 }' >> "$samples"
    done
  done
  i=$((i + 1))
done
{
  echo "### $(basename "$topology" .topo), rates × $scale, all-reduce f32 sum, median of $repeat runs"
  echo
  echo "\`SIZES='$sizes' REPEAT=$repeat SCALE=$scale ROUNDS=${ROUNDS:-3} perf/compare/protection.sh $topology\`"
  echo
  echo "| protection | size | median time (s) | runs (s) | vs. ${protections%% *} |"
  echo "|---|---|---|---|---|"
  baseline=${protections%% *}
  for size in $sizes; do
    base=$(awk -v p="$baseline" -v s="$size" '$1 == p && $2 == s { print $3 }' "$samples" |
      sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }')
    for protection in $protections; do
      runs=$(awk -v p="$protection" -v s="$size" '$1 == p && $2 == s { print $3 }' "$samples" |
        sort -g)
      median=$(echo "$runs" | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }')
      echo "| $protection | $size | $median | $(echo $runs | tr ' ' '/') |" \
        "$(awk -v m="$median" -v b="$base" 'BEGIN { printf "%.3f", m / b }') |"
    done
  done
  echo
} | tee -a "$out"
