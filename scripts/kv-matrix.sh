#!/usr/bin/env bash
# The KV store's proof matrix: the correct mode must be valid under faults, and every
# named bug must be found (invalid) under the fault that exposes it. Prints a markdown
# table of verdicts by seed. Usage: scripts/kv-matrix.sh [SECONDS] [SEEDS...]
#   MATRIX_ROWS="correct stale-read" scripts/kv-matrix.sh 30 1 2 3   # a subset
set -u
secs=${1:-60}
shift || true
seeds=("$@")
[ ${#seeds[@]} -gt 0 ] || seeds=(1 2 3 4 5)
sb=${SPLITBRAIN:-./target/release/splitbrain}
store=${STORE:-store/matrix}
mkdir -p "$store"  # runs land here; every run's output is appended to $store.log

# row name | extra flags
rows=(
  "correct|--nemesis partition,kill,pause"
  "correct-3n|--nodes 3 --nemesis partition,kill,pause"
  "correct-4shards|--shards 4 --nemesis partition,kill,pause"
  "correct-3n-4shards|--nodes 3 --shards 4 --nemesis partition,kill,pause"
  "stale-read|--bug stale-read --nemesis partition"
  "ack-before-commit|--bug ack-before-commit --nemesis partition,kill"
  "no-fsync|--bug no-fsync --nemesis kill"
  "vote-without-log-check|--bug vote-without-log-check --nemesis partition,kill"
  "commit-old-term|--bug commit-old-term --workload append --nemesis leader-churn"
  "correct-churn|--workload append --nemesis leader-churn,kill"
  "lease-no-margin|--bug lease-no-margin --read-mode lease --nemesis partition,clock --nemesis-interval 2"
  "correct-lease|--read-mode lease --nemesis partition,clock --nemesis-interval 2"
)
verdict() {
  case $1 in 0) echo valid ;; 1) echo INVALID ;; 3) echo unknown ;; *) echo "error($1)" ;; esac
}
printf '| row | flags |'; for s in "${seeds[@]}"; do printf ' seed %s |' "$s"; done; echo
printf '|---|---|'; for _ in "${seeds[@]}"; do printf -- '---|'; done; echo
for row in "${rows[@]}"; do
  name=${row%%|*}; flags=${row#*|}
  if [ -n "${MATRIX_ROWS:-}" ] && [[ " $MATRIX_ROWS " != *" $name "* ]]; then continue; fi
  printf '| %s | `%s` |' "$name" "$flags"
  for s in "${seeds[@]}"; do
    # shellcheck disable=SC2086
    "$sb" test --time-limit "$secs" --seed "$s" --store "$store" --name "$name" \
      --no-progress $flags >"$store.log.tmp" 2>&1
    rc=$?; cat "$store.log.tmp" >>"$store.log"; rm -f "$store.log.tmp"; (exit $rc)
    printf ' %s |' "$(verdict $?)"
  done
  echo
done
