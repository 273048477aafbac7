#!/usr/bin/env bash
# Detection rate of the G2-item at SERIALIZABLE (issue 33), per variant of the postgres
# list-append workload: `scripts/pg-g2-detect.sh [SECONDS] [SEEDS...]` prints one line per
# run (variant, seed, verdict, Elle's anomalies, ok/all transactions, missing-row reads)
# and stores the runs under $STORE (default /tmp/pg-g2-store). VARIANTS selects variants
# by name (default: all). Needs ./target/release/splitbrain.
set -u
secs=${1:-20}
shift || true
seeds=${*:-1 2 3 4 5}
store=${STORE:-/tmp/pg-g2-store}
sb=${SB:-./target/release/splitbrain}
mkdir -p "$store"

common=(--target postgres --nodes 1 --workload list-append --read-mode serializable
        --rate 0 --no-progress --time-limit "$secs"
        --setting track_commit_timestamp=on)
declare -A variant=(
  [baseline]="--nemesis none --active-keys 3"
  [fresh]="--nemesis none --active-keys 3 --ops-per-key 8"
  [fresh-upsert]="--nemesis none --active-keys 3 --ops-per-key 8 --setting splitbrain.append=upsert"
  [fresh-30clients]="--nemesis none --active-keys 3 --ops-per-key 8 --concurrency 30"
  [fresh-30clients-upsert]="--nemesis none --active-keys 3 --ops-per-key 8 --concurrency 30 --setting splitbrain.append=upsert"
  [fresh-kill]="--nemesis kill --nemesis-interval 4 --active-keys 3 --ops-per-key 8"
  [ci-kill]="--nemesis kill --nemesis-interval 3 --active-keys 3"
  [baseline-upsert]="--nemesis none --active-keys 3 --setting splitbrain.append=upsert"
  [long-lists]="--nemesis none --active-keys 3 --ops-per-key 400"
  [long-lists-upsert]="--nemesis none --active-keys 3 --ops-per-key 400 --setting splitbrain.append=upsert"
  [baseline-serverlog]="--nemesis none --active-keys 3 --setting log_statement=all --setting log_line_prefix=%m|%p|%x|"
)
names=${VARIANTS:-baseline fresh fresh-upsert fresh-30clients fresh-30clients-upsert fresh-kill ci-kill baseline-upsert long-lists long-lists-upsert}

printf '%-24s %4s %-8s %-40s %-12s %s\n' variant seed verdict anomalies ok/all missing-row-reads
for v in $names; do
  for seed in $seeds; do
    # shellcheck disable=SC2086
    timeout $((secs * 4 + 120)) "$sb" test "${common[@]}" ${variant[$v]} --seed "$seed" \
      --name "pg-$v" --store "$store" > "$store/last.out" 2>&1
    run=$(readlink -f "$store/latest")
    python3 - "$run" "$v" "$seed" <<'EOF'
import json, sys
run, v, seed = sys.argv[1:]
r = json.load(open(f"{run}/results.json"))
elle = next((x for x in r["results"] if x["checker"] == "elle-list-append"), {})
verdict = {True: "valid", False: "INVALID"}.get(elle.get("valid"), str(elle.get("valid")))
anomalies = ",".join(elle.get("anomaly_types", [])) or "-"
ok = total = missing = 0
for line in open(f"{run}/history.jsonl"):
    op = json.loads(line)
    if op.get("f") != "txn" or op["type"] == "invoke":
        continue
    total += 1
    if op["type"] == "ok":
        ok += 1
        missing += sum(1 for m in op["value"] if m[0] == "r" and m[2] is None)
print(f"{v:<24} {seed:>4} {verdict:<8} {anomalies:<40} {ok}/{total:<7} {missing}   {run}")
EOF
  done
done
