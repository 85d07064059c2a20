#!/bin/sh
# hmc against Gloo on an emulated WAN: brings up TOPOLOGY (rates times SCALE), then alternates
# ROUNDS times: hmc all-reduce with 4 and with 16 streams per peer, and Gloo's ring_chunked, all
# f32 sum of SIZE on one rank per emulated host; prints each round and a markdown table of medians.
# Needs root.
#   perf/compare/wan_allreduce.sh TOPOLOGY [SIZE=16M] [SCALE=0.15] [ROUNDS=3]
set -eu
cd "$(dirname "$0")/../.."
topology=$1
size=${2:-16M}
scale=${3:-0.15}
rounds=${4:-3}
prefix=hmcc
wanem=build/bin/hmc-wanem
trap '$wanem down --prefix=$prefix > /dev/null 2>&1' EXIT
$wanem up "$topology" --prefix=$prefix --scale="$scale" > /dev/null
hosts=/run/hmc-wanem/$prefix/hosts
n=$(wc -l < "$hosts")
. perf/compare/common.sh
hmc() {  # STREAMS
  perf/wanem/run.sh $prefix build/bin/hmc-perf -b "$size" -e "$size" -i 3 -w 1 -k 0 \
    --streams="$1" | time_of
}
gloo() {
  store=$(mktemp -d /tmp/hmc-gloo-store-XXXXXX)
  pids=""
  rank=0
  while read -r host region address namespace; do
    $wanem exec "$host" --prefix=$prefix -- env HMC_GLOO_RANK=$rank HMC_GLOO_SIZE="$n" \
      HMC_GLOO_STORE="$store" build/bin/hmc-gloo-allreduce -a ring_chunked -b "$size" \
      -e "$size" -i 3 --host "$address" > "$store/rank$rank.log" 2>&1 &
    pids="$pids $!"
    rank=$((rank + 1))
  done < "$hosts"
  for pid in $pids; do wait "$pid"; done
  time_of < "$store/rank0.log"
  rm -rf "$store"
}
: > /tmp/hmc-wan-$$
i=0
while [ "$i" -lt "$rounds" ]; do
  a=$(hmc 4); b=$(hmc 16); g=$(gloo)
  echo "round $i: hmc/4 streams ${a} us, hmc/16 streams ${b} us, gloo ring_chunked ${g} us"
  echo "$a $b $g" >> /tmp/hmc-wan-$$
  i=$((i + 1))
done
ma=$(median_of /tmp/hmc-wan-$$ 1)
mb=$(median_of /tmp/hmc-wan-$$ 2)
mg=$(median_of /tmp/hmc-wan-$$ 3)
rm -f /tmp/hmc-wan-$$
echo
echo "| system ($(basename "$topology") ×$scale, $n ranks, $size f32 sum) | median time (s) | speed-up over Gloo |"
echo "|---|---|---|"
awk -v a="$ma" -v b="$mb" -v g="$mg" 'BEGIN {
  printf "| hmc, 4 streams per peer | %.2f | %.2f× |\n", a / 1e6, g / a
  printf "| hmc, 16 streams per peer | %.2f | %.2f× |\n", b / 1e6, g / b
  printf "| Gloo allreduce_ring_chunked | %.2f | 1.00× |\n", g / 1e6
}'
