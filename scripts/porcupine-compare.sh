#!/usr/bin/env bash
# splitbrain's linearizability check beside Porcupine's on the same keyed cas-register
# histories (100 keys, 50 processes, INFO % of ops ending info), in one run (issue 42).
#
# For each size in SIZES: generate the history once with splitbrain's generator
# (`bench limit FILE --generate cas --generate-only`), then ROUNDS rounds alternating
# `splitbrain check FILE --model cas-register` and bench/porcupine (Porcupine v1.3.1, its
# own checker and Model API, a keyed cas-register model partitioned by key) on that file,
# each timed by /usr/bin/time -v (wall seconds, peak RSS). Then one history with a corrupt
# read (CORRUPT_SIZE ops), which both must call invalid. Prints a Markdown table: per size
# the median of the rounds, the ratio porcupine / splitbrain, and the verdicts.
#
#   SB=target/release/splitbrain DATA=/tmp/porc-data scripts/porcupine-compare.sh
#
# Env: SB (splitbrain binary), DATA (scratch dir for histories; removed at the end unless
# KEEP=1), SIZES ("1000000 3000000"), INFO (5), ROUNDS (2), CORRUPT_SIZE (first size),
# TIMEOUT (Porcupine's --timeout, 30m), PC (a porcupine-check already built). Needs Go
# (`apt-get install golang-go`) and the Porcupine module from the Go module proxy: the
# first build fetches it and writes bench/porcupine/go.sum (commit that).
# Exits 1 if a verdict is not the expected one or the two checkers disagree.
set -euo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
SB=${SB:-$repo/target/release/splitbrain}
DATA=${DATA:-${TMPDIR:-/tmp}/porc-data}
SIZES=${SIZES:-"1000000 3000000"}
INFO=${INFO:-5}
ROUNDS=${ROUNDS:-2}
TIMEOUT=${TIMEOUT:-30m}
CORRUPT_SIZE=${CORRUPT_SIZE:-${SIZES%% *}}

mkdir -p "$DATA"
cleanup() { [ "${KEEP:-0}" = 1 ] || rm -f "$DATA"/cas-*.jsonl "$DATA"/*.out "$DATA"/*.time; }
trap cleanup EXIT

# PC: a porcupine-check binary already built from bench/porcupine (else built here).
pc=${PC:-$DATA/porcupine-check}
[ -n "${PC:-}" ] || (cd "$repo/bench/porcupine" && go build -mod=mod -o "$pc" .)

# run NAME FILE CMD...: runs CMD under /usr/bin/time -v; prints "seconds rss_mb verdict".
run() {
    local name=$1 file=$2
    shift 2
    local out="$DATA/$name.out" tm="$DATA/$name.time"
    /usr/bin/time -v -o "$tm" "$@" >"$out" 2>"$DATA/$name.err" || true
    local wall rss verdict
    wall=$(awk -F': ' '/Elapsed \(wall clock\)/ {
        n = split($2, p, ":"); s = 0; for (i = 1; i <= n; i++) s = s * 60 + p[i]; print s }' "$tm")
    rss=$(awk -F': ' '/Maximum resident set size/ { printf "%.0f", $2 / 1024 }' "$tm")
    case $name in
    sb*) verdict=$(grep -o '"valid": *[a-z]*' "$out" | head -1 | sed 's/.*: *//;s/true/valid/;s/false/invalid/') ;;
    *) verdict=$(grep -o '"verdict":"[a-z]*"' "$out" | sed 's/.*:"//;s/"//') ;;
    esac
    echo "$wall $rss ${verdict:-none}"
}

median() { sort -g | awk '{ a[NR] = $1 } END { if (NR % 2) print a[(NR + 1) / 2]; else printf "%.2f\n", (a[NR / 2] + a[NR / 2 + 1]) / 2 }'; }

status=0
rows=()
check_pair() { # size corrupt expected
    local size=$1 corrupt=$2 expected=$3 kind=cas
    [ "$corrupt" = 1 ] && kind=cas-corrupt
    local file="$DATA/cas-$size-$INFO-$corrupt.jsonl"
    "$SB" bench limit "$file" --generate "$kind" --size "$size" --info "$INFO" --generate-only >&2
    local sb_s=() pc_s=() sb_rss=() pc_rss=() sb_v=() pc_v=() r first
    for ((r = 1; r <= ROUNDS; r++)); do
        for first in $([ $((r % 2)) = 1 ] && echo "sb pc" || echo "pc sb"); do
            if [ "$first" = sb ]; then
                read -r s m v < <(run "sb" "$file" "$SB" check "$file" --model cas-register --format json --check-time-limit 1800)
                sb_s+=("$s") sb_rss+=("$m") sb_v+=("$v")
            else
                read -r s m v < <(run "pc" "$file" "$pc" --timeout "$TIMEOUT" "$file")
                pc_s+=("$s") pc_rss+=("$m") pc_v+=("$v")
            fi
            echo "size $size corrupt $corrupt round $r $first: $s s, $m MB, $v" >&2
        done
    done
    local sbm pcm ratio
    sbm=$(printf '%s\n' "${sb_s[@]}" | median)
    pcm=$(printf '%s\n' "${pc_s[@]}" | median)
    ratio=$(awk -v a="$pcm" -v b="$sbm" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "-" }')
    local sbv pcv
    sbv=$(printf '%s\n' "${sb_v[@]}" | sort -u | paste -sd/)
    pcv=$(printf '%s\n' "${pc_v[@]}" | sort -u | paste -sd/)
    [ "$sbv" = "$expected" ] && [ "$pcv" = "$expected" ] || status=1
    rows+=("| $size | $INFO | $([ "$corrupt" = 1 ] && echo "corrupt read" || echo generated) | $sbm (${sb_s[*]}) | $(printf '%s\n' "${sb_rss[@]}" | sort -g | tail -1) | $pcm (${pc_s[*]}) | $(printf '%s\n' "${pc_rss[@]}" | sort -g | tail -1) | ${ratio}x | $sbv | $pcv |")
    rm -f "$file"
}

load=$(cut -d' ' -f1-3 /proc/loadavg)
for size in $SIZES; do
    check_pair "$size" 0 valid
done
check_pair "$CORRUPT_SIZE" 1 invalid

echo "$(date -u '+%Y-%m-%d %H:%M UTC'), load before: $load, $(go version | cut -d' ' -f3), porcupine $(awk '/anishathalye\/porcupine/ { print $NF }' "$repo/bench/porcupine/go.mod"), $ROUNDS rounds alternating (median, then every round)"
echo
echo "| ops | info % | history | splitbrain s | splitbrain peak RSS MB | porcupine s | porcupine peak RSS MB | porcupine / splitbrain | splitbrain verdict | porcupine verdict |"
echo "|---|---|---|---|---|---|---|---|---|---|"
printf '%s\n' "${rows[@]}"
exit $status
