#!/usr/bin/env bash
# The whole test suite, as CI runs it: every crate's tests, the quick verification suite,
# then the suite of systems nobody here wrote. Ends by printing how many tests stepped
# aside for a missing dependency (testing/skip.rs); under CI=true each of those is a
# failure instead, so CI prints 0.
set -euo pipefail
cd "$(dirname "$0")/.."
export SPLITBRAIN_SKIP_LOG="${SPLITBRAIN_SKIP_LOG:-${TMPDIR:-/tmp}/splitbrain-test-skips.$$.log}"
: > "$SPLITBRAIN_SKIP_LOG"
report_skips() {
    local n
    n=$(wc -l < "$SPLITBRAIN_SKIP_LOG" | tr -d ' ')
    echo "tests: $n skipped"
    if [ "$n" != 0 ]; then sed 's/^/  skipped: /' "$SPLITBRAIN_SKIP_LOG"; fi
}
trap report_skips EXIT
# The crates' tests. cargo-nextest runs each test as a process of its own, two at a time
# across all test binaries (.config/nextest.toml; MariaDB's and etcd's tests one at a
# time), so a binary whose tests wait on a cluster no longer holds up the rest; it does
# not run doctests, so those run after it. Without nextest, `cargo test` runs the same
# tests, one binary after another.
if cargo nextest --version >/dev/null 2>&1; then
    cargo nextest run --workspace --release
    cargo test --workspace --release --doc
else
    echo "cargo-nextest is not installed: running the tests with cargo test (slower)"
    cargo test --workspace --release
fi
# Two cells at a time: their clusters mostly wait on the network, and a detection that
# holds only on an idle machine is a weak one.
./target/release/splitbrain suite quick --jobs 2
./target/release/splitbrain suite suites/external.toml --jobs 2
