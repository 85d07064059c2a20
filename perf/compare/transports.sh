#!/bin/sh
# hmc-perf over each transport on loopback, alternated, two rounds: hmc's TCP as it runs between
# ranks on one host (Unix sockets, single-copy pulls), hmc's TCP over TCP (no local sockets, no
# frame seals: the path UCX's TCP and libfabric's tcp;ofi_rxm take), UCX, and libfabric with its
# buffers registered where the provider requires it and always. A transport the build lacks
# prints hmc-perf's error. perf/RESULTS.md "Transports" has runs.
# Usage: [BIN=build/bin] perf/compare/transports.sh > out.txt (from a Release build).
set -u
export UCX_NET_DEVICES=lo  # UCX stays on loopback.
cd "$(dirname "$0")/../.."
bin=${BIN:-build/bin}
for round in 1 2; do
  for cfg in "--transport=tcp" "--transport=tcp --local_sockets=false --integrity=off" \
    "--transport=ucx" "--transport=ofi" "--transport=ofi --ofi_register=always"; do
    echo "## round $round: sendrecv 2 ranks $cfg"
    timeout 300 "$bin/hmc-perf" -n 2 -b 1K -e 256M -f 4 -c sendrecv -i 10 -w 3 $cfg 2>&1 | grep -E "^ +[0-9]|rror"
    echo "## round $round: allreduce 4 ranks 64M $cfg"
    timeout 300 "$bin/hmc-perf" -n 4 -b 64M -e 64M -c allreduce -i 10 -w 3 $cfg 2>&1 | grep -E "^ +[0-9]|rror"
  done
done
