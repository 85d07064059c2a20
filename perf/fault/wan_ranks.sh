# Sourced by the scripts that run hmc-fault-rank on an emulated WAN (hmc-wanem): sets `bin`, `out`
# (a fresh folder for the logs) and `token`, and `run HOST LOG COMMAND...`, which starts COMMAND
# on HOST in the background with the coordinator at 10.201.0.1:29400 and the host's region as
# its zone, its output in $out/LOG. Expects `prefix`, the emulation's.
bin=$(cd "$(dirname "$0")/../../build/bin" && pwd)
out=$(mktemp -d)
token=$(head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n')
run() {  # host log command...
  host=$1 log=$2
  shift 2
  "$bin/hmc-wanem" exec "$host" --prefix="$prefix" -- env HMC_TOKEN="$token" \
    HMC_COORDINATOR=10.201.0.1:29400 HMC_ZONE="${host%-*}" "$@" > "$out/$log" 2>&1 &
}
