#!/bin/sh
# Side-by-side 64 MiB f32 all-reduce on loopback: hmc (local sockets, and TCP only) against Gloo's
# ring_chunked, alternated ROUNDS times in one run so that machine noise hits all alike. Prints
# each round and the medians and ratios as a markdown table.
#   perf/compare/loopback_allreduce.sh [RANKS] [ROUNDS]
set -eu
cd "$(dirname "$0")/../.."
ranks=${1:-4}
rounds=${2:-5}
bin=build/bin
. perf/compare/common.sh
: > /tmp/hmc-compare-$$
i=0
while [ "$i" -lt "$rounds" ]; do
  h=$($bin/hmc-perf -n "$ranks" -b 64M -e 64M -i 10 -w 3 -k 0 2>/dev/null | time_of)
  t=$($bin/hmc-perf -n "$ranks" -b 64M -e 64M -i 10 -w 3 -k 0 --local_sockets=0 2>/dev/null | time_of)
  g=$($bin/hmc-gloo-allreduce -n "$ranks" -a ring_chunked -b 64M -e 64M -i 10 2>/dev/null | time_of)
  echo "round $i: hmc ${h} us, hmc-tcp ${t} us, gloo ring_chunked ${g} us"
  echo "$h $t $g" >> /tmp/hmc-compare-$$
  i=$((i + 1))
done
mh=$(median_of /tmp/hmc-compare-$$ 1)
mt=$(median_of /tmp/hmc-compare-$$ 2)
mg=$(median_of /tmp/hmc-compare-$$ 3)
rm -f /tmp/hmc-compare-$$
echo
echo "| system ($ranks ranks, 64 MiB f32 sum) | median time (ms) | time / Gloo ring_chunked |"
echo "|---|---|---|"
awk -v h="$mh" -v t="$mt" -v g="$mg" 'BEGIN {
  printf "| hmc (local sockets, default) | %.1f | %.2f |\n", h / 1000, h / g
  printf "| hmc (TCP loopback, --local_sockets=0) | %.1f | %.2f |\n", t / 1000, t / g
  printf "| Gloo allreduce_ring_chunked | %.1f | 1.00 |\n", g / 1000
}'
