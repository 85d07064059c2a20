#!/bin/sh
# A backward's averaging overlapped or not, on an emulated WAN (perf/RESULTS.md): four ranks, one
# per host of the topology's first four, alternate steps of --pause of work followed by Average
# with steps whose round takes its parts during the work (hmc-fault-rank --overlap). Prints rank
# 0's medians.
#   build/bin/hmc-wanem up perf/topologies/us-eu.topo --prefix=hmco --scale=0.1 --mtu=9000
#   perf/fault/overlap_wan.sh hmco [STEPS FLOATS PARTS WORK]
#   build/bin/hmc-wanem down --prefix=hmco
set -eu
prefix=${1:?usage: overlap_wan.sh PREFIX [STEPS FLOATS PARTS WORK]}
steps=${2:-10}
floats=${3:-1048576}
parts=${4:-4}
work=${5:-500ms}
. "$(dirname "$0")/wan_ranks.sh"
hosts=$("$bin/hmc-wanem" status --prefix="$prefix" | awk '$3 ~ /^10\./ {print $1}' | head -4 | tr '\n' ' ')
run ${hosts%% *} coordinator.log "$bin/hmc-coordinator" --bind=10.201.0.1:29400 --world_size=4
sleep 0.5
members "$hosts" "$bin/hmc-fault-rank" --overlap="$steps" --count="$floats" --parts="$parts" \
  --pause="$work"
wait
grep -h "ratio" "$out/rank0.log" || cat "$out"/rank*.log
rm -rf "$out"
