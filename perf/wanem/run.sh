#!/bin/sh
# Runs one rank of an hmc program on every host of a running hmc-wanem emulation, with a
# coordinator on the first host, and prints rank 0's output (the others' go to /tmp): what the
# benchmark scripts parse. Interactively, `hmcrun -hosts examples/inventory.wan PROGRAM` does the
# same (prefix hmcw) with every rank's output prefixed.
#   perf/wanem/run.sh PREFIX PROGRAM [ARGS...]
#   e.g. build/bin/hmc-wanem up perf/topologies/us-eu.topo --prefix=hmcw
#        perf/wanem/run.sh hmcw build/bin/hmc-perf --probe -e 16M
# HMC_HEARTBEAT_TIMEOUT, when set, is the coordinator's heartbeat timeout as well as the ranks'.
set -eu
cd "$(dirname "$0")/../.."
prefix=$1
shift
hosts_file=/run/hmc-wanem/$prefix/hosts
[ -f "$hosts_file" ] || { echo "run.sh: no emulation '$prefix' is up" >&2; exit 1; }
wanem=build/bin/hmc-wanem
n=$(wc -l < "$hosts_file")
first_host=$(awk 'NR == 1 { print $1 }' "$hosts_file")
first_address=$(awk 'NR == 1 { print $3 }' "$hosts_file")
HMC_TOKEN=$(head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n')
export HMC_TOKEN
$wanem exec "$first_host" --prefix="$prefix" -- build/bin/hmc-coordinator \
  --bind="$first_address:29400" --world_size="$n" \
  --heartbeat_timeout="${HMC_HEARTBEAT_TIMEOUT:-0}" > "/tmp/hmc-run-$prefix-coordinator.log" 2>&1 &
coordinator=$!
pids=""
rank=0
while read -r host region address namespace; do
  out=/tmp/hmc-run-$prefix-rank$rank.log
  $wanem exec "$host" --prefix="$prefix" -- env HMC_COORDINATOR="$first_address:29400" \
    HMC_RANK=$rank HMC_ZONE="$region" "$@" > "$out" 2>&1 &
  pids="$pids $!"
  rank=$((rank + 1))
done < "$hosts_file"
status=0
for pid in $pids; do wait "$pid" || status=1; done
wait "$coordinator" || true
grep -v 'hmc\[' "/tmp/hmc-run-$prefix-rank0.log"
exit $status
