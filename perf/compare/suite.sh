#!/bin/sh
# Every system side by side on one topology, in one run: hmc (streams per peer chosen by its
# probe), Gloo's four all-reduce algorithms (a fresh context each), Open MPI's MPI_Allreduce and
# torch.distributed's all_reduce (gloo backend); f32 sum, the same sizes and ranks for all,
# alternated ROUNDS times with the order rotating each round. Every result row is appended to CSV:
#   topology,scale,round,system,ranks,bytes,time_us,busbw_gbps,wrong
# and perf/compare/report.py turns the CSV into a markdown table and a plot. Needs root for
# emulated topologies.
#   perf/compare/suite.sh TOPOLOGY
#   TOPOLOGY: loopback (RANKS processes on 127.0.0.1), or a topology file: hmc-wanem brings it up
#   (rates × SCALE, MTU) and every system runs one rank per emulated host.
# Settings (environment): ROUNDS=3  SIZES="1M 64M 4" (min, max, factor)  ITERS=3  WARMUP=1  CHECK=1
#   SYSTEMS="hmc gloo-ring gloo-ring_chunked gloo-halving_doubling gloo-bcube mpi torch"
#   RANKS=4  SCALE=0.1  MTU=9000  CSV=perf/results/compare.csv  BIN=build/bin
set -eu
cd "$(dirname "$0")/../.."
topology=$1
rounds=${ROUNDS:-3}
set -- ${SIZES:-1M 64M 4}
sizes="-b $1 -e $2 -f $3"
reps="-i ${ITERS:-3} -w ${WARMUP:-1} -k ${CHECK:-1}"
systems=${SYSTEMS:-hmc gloo-ring gloo-ring_chunked gloo-halving_doubling gloo-bcube mpi torch}
scale=${SCALE:-0.1}
csv=${CSV:-perf/results/compare.csv}
bin=${BIN:-$(pwd)/build/bin}
wanem=$bin/hmc-wanem
prefix=hmcs
logs=$(mktemp -d /tmp/hmc-suite-XXXXXX)
mpi_flags="--allow-run-as-root --oversubscribe --mca pml ob1 --mca btl tcp,self"

if [ "$topology" = loopback ]; then
  name=loopback
  scale=1
  n=${RANKS:-4}
  trap 'rm -rf "$logs"' EXIT
else
  name=$(basename "$topology" .topo)
  trap '$wanem down --prefix=$prefix > /dev/null 2>&1; rm -rf "$logs"' EXIT
  $wanem down --prefix=$prefix > /dev/null 2>&1 || true
  $wanem up "$topology" --prefix=$prefix --scale="$scale" --mtu="${MTU:-9000}" > /dev/null
  hosts=/run/hmc-wanem/$prefix/hosts
  n=$(wc -l < "$hosts")
  first_host=$(awk 'NR == 1 { print $1 }' "$hosts")
  first_address=$(awk 'NR == 1 { print $3 }' "$hosts")
fi

# on_every_host COMMAND...: runs COMMAND once per emulated host, in parallel, with RANK, ADDRESS
# and IFNAME set; waits for all; rank 0's output on stdout.
on_every_host() {
  pids=""
  i=0
  while read -r host region address namespace; do
    $wanem exec "$host" --prefix=$prefix -- env RANK=$i ADDRESS="$address" \
      IFNAME="${prefix}t$i" sh -c "$*" > "$logs/host$i.log" 2>&1 &
    pids="$pids $!"
    i=$((i + 1))
  done < "$hosts"
  status=0
  for pid in $pids; do wait "$pid" || status=1; done
  cat "$logs/host0.log"
  return $status
}

run_system() {  # SYSTEM: prints the program's table
  case "$1" in
    hmc)
      if [ "$name" = loopback ]; then
        $bin/hmc-perf -n "$n" $sizes $reps
      else
        perf/wanem/run.sh $prefix $bin/hmc-perf $sizes $reps
      fi ;;
    gloo-*)
      algorithm=${1#gloo-}
      if [ "$name" = loopback ]; then
        $bin/hmc-gloo-allreduce -n "$n" -a "$algorithm" $sizes $reps
      else
        store=$(mktemp -d "$logs/store-XXXXXX")
        on_every_host "HMC_GLOO_RANK=\$RANK HMC_GLOO_SIZE=$n HMC_GLOO_STORE=$store" \
          "$bin/hmc-gloo-allreduce -a $algorithm $sizes $reps --host \$ADDRESS"
      fi ;;
    mpi)
      if [ "$name" = loopback ]; then
        mpirun $mpi_flags -np "$n" $bin/hmc-mpi-allreduce $sizes $reps
      else
        # One Open MPI daemon per emulated host, started through an rsh agent that enters the
        # host's namespace, as ssh would on real machines; data only on the emulated network.
        awk '{ print $3 " slots=1" }' "$hosts" > "$logs/hostfile"
        $wanem exec "$first_host" --prefix=$prefix -- env HMC_WANEM_PREFIX=$prefix \
          mpirun $mpi_flags -np "$n" --hostfile "$logs/hostfile" \
          --mca plm_rsh_agent "$(pwd)/perf/wanem/rsh.sh" --mca plm_rsh_no_tree_spawn 1 \
          --mca btl_tcp_if_include 10.201.0.0/16 --mca oob_tcp_if_include 10.201.0.0/16 \
          $bin/hmc-mpi-allreduce $sizes $reps
      fi ;;
    torch)
      if [ "$name" = loopback ]; then
        /usr/bin/python3 perf/compare/torch_allreduce.py -n "$n" $sizes $reps
      else
        on_every_host "HMC_TORCH_RANK=\$RANK HMC_TORCH_SIZE=$n" \
          "HMC_TORCH_MASTER=$first_address:29511 GLOO_SOCKET_IFNAME=\$IFNAME" \
          "/usr/bin/python3 perf/compare/torch_allreduce.py $sizes $reps"
      fi ;;
    *) echo "suite.sh: unknown system $1" >&2; return 2 ;;
  esac
}

mkdir -p "$(dirname "$csv")"
[ -f "$csv" ] || echo "topology,scale,round,system,ranks,bytes,time_us,busbw_gbps,wrong" > "$csv"
echo "# $name: $n ranks, scale $scale, sizes $sizes, $reps, $rounds rounds"
round=0
while [ "$round" -lt "$rounds" ]; do
  # Rotate the order so that no system always runs first (or after the same one).
  order=$(echo $systems | awk -v r="$round" '{ for (i = 0; i < NF; i++) printf "%s ", $((i + r) % NF + 1) }')
  for system in $order; do
    if ! run_system "$system" > "$logs/$system.out" 2>&1; then
      echo "round $round: $system FAILED:" >&2
      tail -5 "$logs/$system.out" >&2
      continue
    fi
    awk -v t="$name" -v s="$scale" -v r="$round" -v sys="$system" -v n="$n" \
      '$1 ~ /^[0-9]+$/ && NF >= 8 { printf "%s,%s,%s,%s,%s,%s,%s,%s,%s\n", t, s, r, sys, n, $1, $5, $7, $8 }' \
      "$logs/$system.out" | tee -a "$csv" | awk -F, '{ printf "round %s %-22s %12s B %14.1f us %8.3f GB/s wrong %s\n", $3, $4, $6, $7, $8, $9 }'
  done
  round=$((round + 1))
done
