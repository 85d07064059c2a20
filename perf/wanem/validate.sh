#!/bin/sh
# Validates hmc-wanem against what it emulates: for each rate, a two-host topology whose path
# has RTT 50 ms, per-flow cap RATE and capacity 4×RATE; measures the RTT with ping and the
# throughput of one and of eight TCP streams with iperf3 (10 s, the first 3 s omitted), and prints
# a markdown table of expected against measured. The highest rate where the numbers still hold
# is the emulator's ceiling on this machine. MTU sets the emulated interfaces' MTU (default
# 1500; the forwarder's cost is per packet, so 9000 raises the ceiling). Needs root.
#   [MTU=9000] perf/wanem/validate.sh [RATE_MBIT ...]      (default: 50 100 200 400 800)
set -eu
cd "$(dirname "$0")/../.."
wanem=build/bin/hmc-wanem
prefix=hmcv
rates=${*:-50 100 200 400 800}
topology=$(mktemp /tmp/hmc-validate-XXXXXX.topo)
pidfile=$topology.iperf3.pid
trap '[ -f "$pidfile" ] && kill "$(cat "$pidfile")"; $wanem down --prefix=$prefix > /dev/null 2>&1; rm -f "$topology" "$pidfile"' EXIT
echo "| flow cap (Mbit/s) | RTT set / measured (ms) | 1 stream expected / measured (Mbit/s) | 8 streams expected / measured (Mbit/s) |"
echo "|---|---|---|---|"
for rate in $rates; do
  cat > "$topology" <<TOPO
region a
region b
host a-0 region=a
host b-0 region=b
path a a rtt=0.1ms capacity=100Gbit
path b b rtt=0.1ms capacity=100Gbit
path a b rtt=50ms capacity=$((rate * 4))Mbit flow=${rate}Mbit
TOPO
  $wanem up "$topology" --prefix=$prefix --mtu="${MTU:-1500}" > /dev/null
  x="$wanem exec --prefix=$prefix"
  rtt=$($x a-0 -- ping -q -c 10 -i 0.2 10.201.0.2 | awk -F/ '/^rtt/ { print $5 }')
  $x b-0 -- iperf3 -s -D -I "$pidfile" > /dev/null 2>&1
  sleep 0.5
  one=$($x a-0 -- iperf3 -c 10.201.0.2 -t 10 -O 3 -f m | awk '/receiver/ { print $7 }')
  eight=$($x a-0 -- iperf3 -c 10.201.0.2 -t 10 -O 3 -P 8 -f m | awk '/SUM.*receiver/ { print $6 }')
  kill "$(cat "$pidfile")"  # The server is stopped by its PID.
  rm -f "$pidfile"
  $wanem down --prefix=$prefix > /dev/null
  echo "| $rate | 50 / $rtt | $rate / $one | $((rate * 4)) / $eight |"
done
