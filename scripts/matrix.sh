#!/usr/bin/env bash
# A bundled target's proof matrix: its correct modes must be valid under faults, and every
# named bug must be found (invalid) under the fault that exposes it. Prints a markdown
# table of verdicts by seed, with the anomaly types each invalid run named.
# Usage: scripts/matrix.sh TARGET [SECONDS] [SEEDS...]        TARGET: kv, txn, bayou or ddp
#   MATRIX_ROWS="correct stale-read" scripts/matrix.sh kv 30 1 2 3   # a subset
# Env: SPLITBRAIN (binary, default ./target/release/splitbrain), STORE (default
# store/matrix-TARGET; every run's output is appended to $STORE.log).
set -u
target=${1:?usage: scripts/matrix.sh kv|txn|bayou|ddp [SECONDS] [SEEDS...]}
shift
secs=${1:-60}
shift || true
seeds=("$@")
[ ${#seeds[@]} -gt 0 ] || seeds=(1 2 3 4 5)
sb=${SPLITBRAIN:-./target/release/splitbrain}
store=${STORE:-store/matrix-$target}
mkdir -p "$store"

# row name | extra flags
case $target in
kv)
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
  ) ;;
txn)
  rows=(
    "correct-append|--workload list-append --nemesis partition,kill,pause"
    "correct-register|--workload rw-register --nemesis partition,kill,pause"
    "correct-bank|--workload bank --nemesis partition,kill,pause,slow"
    "correct-links|--workload list-append --nemesis slow,loss,clock"
    "correct-contended|--workload list-append --rate 0 --active-keys 4 --nemesis kill,pause"
    "read-committed|--workload list-append --read-mode read-committed --rate 0 --nemesis none"
    "read-committed-checked-as-rc|--workload list-append --read-mode read-committed --consistency-model read-committed --nemesis partition,kill"
    "read-committed-register|--workload rw-register --read-mode read-committed --rate 0 --nemesis none"
    "read-committed-bank|--workload bank --read-mode read-committed --rate 0 --nemesis none"
    "dirty-read|--workload list-append --bug dirty-read --rate 0 --nemesis none"
    "early-lock-release|--workload rw-register --bug early-lock-release --rate 0 --nemesis none"
    "early-lock-release-bank|--workload bank --bug early-lock-release --nemesis none"
    "unilateral-abort|--workload bank --bug unilateral-abort --nemesis slow"
    "unilateral-abort-append|--workload list-append --bug unilateral-abort --nemesis slow"
    "no-prepare-fsync|--workload list-append --bug no-prepare-fsync --nemesis kill"
  ) ;;
bayou)
  rows=(
    "correct-set|--workload set --nemesis partition,kill,pause,clock"
    "correct-booking|--workload booking --nemesis partition,kill,pause,clock"
    "correct-counter|--workload counter --nemesis partition,kill,pause,clock"
    "no-rollback|--workload booking --bug no-rollback --nemesis none"
    "lose-tentative|--workload set --bug lose-tentative --nemesis kill"
    "reorder-commit|--workload set --bug reorder-commit --nemesis kill"
    "stale-commit-sync|--workload set --bug stale-commit-sync --nemesis none"
    "stale-session|--workload set --bug stale-session --nemesis partition"
  ) ;;
ddp)
  # One process follows each of the 4 ranks; --rate 0 so every committed step is recorded.
  t="--workload train --nodes 4 --concurrency 4 --rate 0"
  rows=(
    "correct|$t --nemesis kill,pause,partition"
    "skip-allreduce|$t --bug skip-allreduce --nemesis none"
    "no-init-broadcast|$t --bug no-init-broadcast --nemesis none"
    "sampler-overlap|$t --bug sampler-overlap --nemesis none"
    "resume-without-sampler-state|$t --bug resume-without-sampler-state --nemesis kill"
    "unordered-reduce|$t --bug unordered-reduce --nemesis none"
    "stale-bucket|$t --bug stale-bucket --nemesis slow"
  ) ;;
*) echo "unknown target $target (kv, txn, bayou or ddp)" >&2; exit 2 ;;
esac

# What the newest run of test $1 found: the anomaly types it named, comma separated, or
# (for checkers that name none) the checkers that said invalid.
anomalies() {
  local results="$store/$1/latest/results.json"
  [ -f "$results" ] || return 0
  local a
  a=$(tr -d ' \n' <"$results" | grep -o '"anomaly_types":\[[^]]*\]' | sed 's/.*\[//; s/\]//; s/"//g' |
    tr '\n' ',' | sed 's/,,*/,/g; s/^,//; s/,$//')
  if [ -z "$a" ]; then
    a=$(tr -d ' \n' <"$results" | grep -o '"checker":"[^"]*","valid":false' |
      sed 's/"checker":"//; s/",.*//' | tr '\n' ',' | sed 's/,$//')
  fi
  echo "$a"
}
verdict() {
  case $1 in
  0) echo valid ;;
  1) local a; a=$(anomalies "$2"); echo "INVALID${a:+ ($a)}" ;;
  3) echo unknown ;;
  *) echo "error($1)" ;;
  esac
}
printf '| row | flags |'; for s in "${seeds[@]}"; do printf ' seed %s |' "$s"; done; echo
printf '|---|---|'; for _ in "${seeds[@]}"; do printf -- '---|'; done; echo
for row in "${rows[@]}"; do
  name=${row%%|*}; flags=${row#*|}
  if [ -n "${MATRIX_ROWS:-}" ] && [[ " $MATRIX_ROWS " != *" $name "* ]]; then continue; fi
  printf '| %s | `%s` |' "$name" "$flags"
  for s in "${seeds[@]}"; do
    # shellcheck disable=SC2086
    "$sb" test --target "$target" --time-limit "$secs" --seed "$s" --store "$store" \
      --name "$name" --no-progress $flags >"$store.log.tmp" 2>&1
    rc=$?; cat "$store.log.tmp" >>"$store.log"; rm -f "$store.log.tmp"
    printf ' %s |' "$(verdict $rc "$name")"
  done
  echo
done
