#!/usr/bin/env bash
# A bundled target's proof matrix, now a thin wrapper over `splitbrain suite full` (the rows,
# flags and expected verdicts live in suites/full.toml): correct modes must be valid under
# faults, every named bug must be found under the fault that exposes it. Prints the
# detection table; exits as `splitbrain suite` does (0 every row met its expectation).
# Usage: scripts/matrix.sh TARGET [SECONDS] [SEEDS...]        TARGET: kv, txn, bayou or ddp
#   MATRIX_ROWS="correct stale-read" scripts/matrix.sh kv 30 1 2 3   # a subset
# Env: SPLITBRAIN (binary, default ./target/release/splitbrain), STORE (default
# store/matrix-TARGET), MARKDOWN (also write the table as Markdown to this file).
set -euo pipefail
target=${1:?usage: scripts/matrix.sh kv|txn|bayou|ddp [SECONDS] [SEEDS...]}
shift
args=(suite full --store "${STORE:-store/matrix-$target}")
if [ $# -gt 0 ]; then args+=(--time-limit "$1"); shift; fi
if [ $# -gt 0 ]; then args+=(--seeds "$(IFS=,; echo "$*")"); fi
if [ -n "${MATRIX_ROWS:-}" ]; then
  for row in $MATRIX_ROWS; do args+=(--only "$target/$row"); done
else
  args+=(--only "$target/")
fi
if [ -n "${MARKDOWN:-}" ]; then args+=(--markdown "$MARKDOWN"); fi
exec "${SPLITBRAIN:-./target/release/splitbrain}" "${args[@]}"
