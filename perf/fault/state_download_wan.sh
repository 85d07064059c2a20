#!/bin/sh
# The 100 MiB state download on the emulated US+EU (perf/RESULTS.md): three members on us-0, us-1
# and eu-0 average rounds with 100 MiB of state; once they run, a fourth rank joins from eu-1 and
# downloads it. Prints the joiner's download line and every rank's last state hash (all equal).
#   build/bin/hmc-wanem up perf/topologies/us-eu.topo --prefix=hmcs --scale=0.1 --mtu=9000
#   perf/fault/state_download_wan.sh hmcs [FLOATS]
#   build/bin/hmc-wanem down --prefix=hmcs
set -eu
prefix=${1:?usage: state_download_wan.sh PREFIX [FLOATS]}
floats=${2:-26214400}
. "$(dirname "$0")/wan_ranks.sh"
rounds=60
run us-0 coordinator.log "$bin/hmc-coordinator" --bind=10.201.0.1:29400 --world_size=3 --max_ranks=4
sleep 0.5
members "us-0 us-1 eu-0" "$bin/hmc-fault-rank" --rounds=$rounds --pause=300ms --count=4096 \
  --state="$floats"
# The joiner, once the members average.
await rank0.log "^committed round=2 " || true
run eu-1 joiner.log "$bin/hmc-fault-rank" --rounds=$rounds --pause=300ms --count=4096 \
  --state="$floats"
wait
grep -h "downloaded the members' state" "$out/joiner.log" | sed 's/.*rank/rank/'
grep -h "^state round=$((rounds - 1)) " "$out"/rank*.log "$out/joiner.log" | sort | uniq -c
rm -rf "$out"
