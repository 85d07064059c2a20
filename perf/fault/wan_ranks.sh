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
# members "HOST..." COMMAND...: COMMAND on each host as ranks 0, 1, ... (HMC_RANK), logs rankN.log.
members() {
  hosts=$1
  shift
  rank=0
  for host in $hosts; do
    run "$host" "rank$rank.log" env HMC_RANK=$rank "$@"
    rank=$((rank + 1))
  done
}
# await LOG PATTERN: until a line of $out/LOG matches PATTERN (bounded: two minutes).
await() {
  for _ in $(seq 1 1200); do
    grep -q "$2" "$out/$1" 2>/dev/null && return 0
    sleep 0.1
  done
  return 1
}
