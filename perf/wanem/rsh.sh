#!/bin/sh
# An rsh/ssh stand-in that runs a command on an emulated host: what Open MPI's mpirun uses
# (--mca plm_rsh_agent) to start its daemon on each hmc-wanem host, as ssh would on real machines.
# HOST is a host name or address of the emulation named by HMC_WANEM_PREFIX (default hmcw).
#   perf/wanem/rsh.sh HOST COMMAND...
set -eu
host=$1
shift
hosts=/run/hmc-wanem/${HMC_WANEM_PREFIX:-hmcw}/hosts
namespace=$(awk -v h="$host" '$1 == h || $3 == h { print $4 }' "$hosts")
[ -n "$namespace" ] || { echo "rsh.sh: no emulated host '$host' in $hosts" >&2; exit 255; }
# Like ssh, the remote side gets the command as one string for a shell.
exec ip netns exec "$namespace" /bin/sh -c "$*"
