#!/bin/sh
# The story of a preempted machine (examples_test's TrainCv.KilledRankIsRestartedAndRejoins...)
# on the emulated four continents: hmcrun --restart=on-failure runs train_cv --sync=ddp-ft on one
# rank per continent (examples/inventory.wan); KILL_AFTER seconds into training the rank on
# asia-0 is killed with SIGKILL; hmcrun starts it again, it joins the running group with its
# parameters and optimizer state, and training goes on. Prints the membership changes, every
# rank's last parameters hash and the JSON lines (perf/RESULTS.md).
#   build/bin/hmc-wanem up perf/topologies/four-continents.topo --prefix=hmcw --scale=0.1 --mtu=9000
#   perf/training/train_cv_story_wan.sh [KILL_AFTER]
#   build/bin/hmc-wanem down --prefix=hmcw
set -eu
kill_after=${1:-120}
root=$(cd "$(dirname "$0")/../.." && pwd)
out=$(mktemp -d)
mark="HMC_STORY=$$"
"$root/build/bin/hmcrun" -hosts "$root/examples/inventory.wan" -np 4 --restart=on-failure \
  --timeout 60m -x "$mark" "$root/build/bin/train_cv" --sync=ddp-ft --json="$out/story.jsonl" \
  > "$out/story.out" 2>&1 &
hmcrun=$!
# Once the four ranks train (bounded: five minutes), the rank in slot 2 (asia-0) dies.
for _ in $(seq 1 600); do
  grep -q "4 of 4" "$out/story.out" && break
  sleep 0.5
done
sleep "$kill_after"
for pid in $(pgrep -f "$root/build/bin/train_cv"); do
  env_of=$(tr '\0' '\n' < "/proc/$pid/environ" 2>/dev/null || true)
  if echo "$env_of" | grep -qx "$mark" && echo "$env_of" | grep -qx "HMC_RANK=2"; then
    echo "killing rank 2 (pid $pid) $kill_after s into training"
    kill -9 "$pid"
  fi
done
status=0
wait "$hmcrun" || status=$?
echo "hmcrun exited $status"
grep -h "restarting it\|joined the group\|training resumed\|failed:\|epoch 2 ends at step" \
  "$out/story.out" | sed 's/^.*hmc\[/hmc[/'
echo "the restarted rank (id 4), from its join to its first committed step:"
grep -h "rank 4 joined\|rank 4: joins\|rank 4: downloaded\|(rank 4 joined): training resumed" \
  "$out/story.out" | sed 's/^.*\] //'
cat "$out/story.jsonl"
rm -rf "$out"
