#!/bin/sh
# A replacement's links on the emulated four continents (perf/RESULTS.md): four members on us-0,
# eu-0, asia-0 and oce-0 probe their links when the group forms; asia-0 dies at round 8 and a
# replacement joins from asia-1. Its links are not probed but inferred (joiner_links.h); at the
# end every rank prints the links it planned with, then probes them again and prints those.
#   build/bin/hmc-wanem up perf/topologies/four-continents.topo --prefix=hmcj --scale=0.1
#   perf/fault/joiner_links_wan.sh hmcj
#   build/bin/hmc-wanem down --prefix=hmcj
set -eu
prefix=${1:?usage: joiner_links_wan.sh PREFIX}
. "$(dirname "$0")/wan_ranks.sh"
rounds=40
probe="HMC_PROBE=true HMC_STREAMS=2"  # Split into two words where used.
run us-0 coordinator.log "$bin/hmc-coordinator" --bind=10.201.0.1:29400 --world_size=4
sleep 0.5
members "us-0 eu-0 asia-0 oce-0" $probe "$bin/hmc-fault-rank" --rounds=$rounds --pause=200ms \
  --count=4096 --die_id=2 --die_at=8 --reprobe
# The replacement, once asia-0 is gone.
await coordinator.log "rank 2 failed" || true
run asia-1 joiner.log env $probe "$bin/hmc-fault-rank" --rounds=$rounds --pause=200ms \
  --count=4096 --reprobe
wait
sed -n '/^planned with/,$p' "$out/joiner.log"
grep -h "^links \|^error" "$out"/rank*.log "$out/joiner.log" | sort | uniq -c
rm -rf "$out"
