#!/usr/bin/env bash
# splitbrain's linearizability check beside Porcupine's on the same keyed cas-register
# histories (100 keys, 50 processes, INFO % of ops ending info), in one run (issue 42).
#
# For each size in SIZES, with and without one corrupt read (CORRUPT=both|no|only):
# generate the history once with splitbrain's generator (`bench limit FILE --generate cas
# --generate-only`, or `cas-corrupt`), then ROUNDS rounds alternating `splitbrain check
# FILE --model cas-register` and bench/porcupine (Porcupine's own checker and Model API, a
# keyed cas-register model partitioned by key) on that file, each under /usr/bin/time -v
# (wall seconds, peak RSS). Both print their phases, timed inside the process: splitbrain
# its read (parse) and check seconds (SPLITBRAIN_CHECK_PROFILE), Porcupine-check its parse
# (our reader: Porcupine has none for this format; PC_READER=fast, the parallel scanner of
# bench/porcupine/reader.go, or json, encoding/json line by line) and check seconds
# (CheckOperationsTimeout alone). Before the rounds, `porcupine-check --verify-reader`
# checks that both readers build the same operations from the file. Prints a Markdown
# table: per history the best (minimum) of the rounds of each figure, the ratios
# porcupine / splitbrain for the total (wall) and for the check alone, and both verdicts.
#
#   PORCUPINE_SRC=/path/to/porcupine SB=target/release/splitbrain scripts/porcupine-compare.sh
#
# PORCUPINE_SRC: a directory holding Porcupine's Go module source (its root package:
# checker.go, model.go, porcupine.go, bitset.go, ...), however you got it. bench/porcupine
# is copied to DATA and built against it with a `replace` directive, offline (GOPROXY=off).
# Without PORCUPINE_SRC the build fetches the version bench/porcupine/go.mod requires
# through the Go module proxy. PC: a porcupine-check binary already built (skips the build).
#
# Env: SB (splitbrain binary), DATA (scratch dir; histories removed at the end unless
# KEEP=1), SIZES ("1000000 3000000 10000000"), INFO (5), ROUNDS (1), CORRUPT (both),
# PC_READER (fast),
# TIMEOUT (Porcupine's --timeout, 30m), PC_RSS_CAP_MB (12000: Porcupine is stopped when
# its resident set passes this, so the machine is not run out of memory; its row then says
# "stopped"). Needs Go 1.19 or newer and /usr/bin/time.
# Exits 1 if a verdict is not the expected one (splitbrain must say valid / invalid;
# Porcupine must too unless it was stopped or timed out).
set -euo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
SB=${SB:-$repo/target/release/splitbrain}
DATA=${DATA:-${TMPDIR:-/tmp}/porc-data}
SIZES=${SIZES:-"1000000 3000000 10000000"}
INFO=${INFO:-5}
ROUNDS=${ROUNDS:-1}
CORRUPT=${CORRUPT:-both}
TIMEOUT=${TIMEOUT:-30m}
PC_RSS_CAP_MB=${PC_RSS_CAP_MB:-12000}
PC_READER=${PC_READER:-fast}

mkdir -p "$DATA"
cleanup() { [ "${KEEP:-0}" = 1 ] || rm -f "$DATA"/cas-*.jsonl "$DATA"/*.out "$DATA"/*.err "$DATA"/*.time; }
trap cleanup EXIT

# PC: a porcupine-check binary already built from bench/porcupine (else built here).
pc=${PC:-$DATA/porcupine-check}
pc_from="prebuilt $pc"
if [ -z "${PC:-}" ]; then
    build="$DATA/pc-build"
    rm -rf "$build" && mkdir -p "$build"
    cp "$repo"/bench/porcupine/*.go "$repo/bench/porcupine/go.mod" "$build/"
    if [ -n "${PORCUPINE_SRC:-}" ]; then
        src=$(cd "$PORCUPINE_SRC" && pwd)
        (cd "$build" && go mod edit -replace "github.com/anishathalye/porcupine=$src" &&
            GOFLAGS=-mod=mod GOPROXY=off GONOSUMDB='*' GONOSUMCHECK=1 go build -o "$pc" .)
        pc_from="Porcupine source at $src"
    else
        (cd "$build" && go build -mod=mod -o "$pc" .)
        pc_from="Porcupine $(awk '/anishathalye\/porcupine/ { print $NF }' "$repo/bench/porcupine/go.mod") via the module proxy"
    fi
fi

# pc_watch PID: stops PID's child (the porcupine-check under time) past PC_RSS_CAP_MB.
pc_watch() {
    local tpid=$1 child rss
    while kill -0 "$tpid" 2>/dev/null; do
        child=$(cat "/proc/$tpid/task/$tpid/children" 2>/dev/null | awk '{ print $1 }')
        if [ -n "$child" ]; then
            rss=$(awk '/^VmRSS/ { print int($2 / 1024) }' "/proc/$child/status" 2>/dev/null || echo 0)
            if [ "${rss:-0}" -gt "$PC_RSS_CAP_MB" ]; then
                kill "$child" 2>/dev/null || true
                echo stopped >"$DATA/pc.stopped"
                return
            fi
        fi
        sleep 0.2
    done
}

# run NAME CMD...: runs CMD under /usr/bin/time -v; prints "seconds rss_mb verdict parse
# check" (parse and check as the program timed them in its own process).
run() {
    local name=$1
    shift
    local out="$DATA/$name.out" tm="$DATA/$name.time"
    rm -f "$DATA/pc.stopped"
    /usr/bin/time -v -o "$tm" "$@" >"$out" 2>"$DATA/$name.err" &
    local tpid=$!
    [ "$name" = pc ] && pc_watch "$tpid" &
    wait "$tpid" || true
    wait || true
    local wall rss verdict parse=- check=-
    wall=$(awk -F': ' '/Elapsed \(wall clock\)/ {
        n = split($2, p, ":"); s = 0; for (i = 1; i <= n; i++) s = s * 60 + p[i]; print s }' "$tm")
    rss=$(awk -F': ' '/Maximum resident set size/ { printf "%.0f", $2 / 1024 }' "$tm")
    case $name in
    sb)
        verdict=$(grep -o '"valid": *[a-z]*' "$out" | head -1 | sed 's/.*: *//;s/true/valid/;s/false/invalid/' || true)
        parse=$(awk '/^check profile: read / { print $4 }' "$DATA/$name.err" | head -1)
        check=$(awk '/^check profile: check / { print $4 }' "$DATA/$name.err" | head -1)
        ;;
    *)
        verdict=$(grep -o '"verdict":"[a-z]*"' "$out" | sed 's/.*:"//;s/"//' || true)
        parse=$(grep -o '"parse_s":[0-9.]*' "$out" | sed 's/.*://' || true)
        check=$(grep -o '"check_s":[0-9.]*' "$out" | sed 's/.*://' || true)
        [ -f "$DATA/pc.stopped" ] && verdict="stopped-at-${PC_RSS_CAP_MB}MB"
        ;;
    esac
    echo "$wall $rss ${verdict:-none} ${parse:--} ${check:--}"
}

minimum() { sort -g | head -1; }

status=0
rows=()
check_pair() { # size corrupt expected
    local size=$1 corrupt=$2 expected=$3 kind=cas
    [ "$corrupt" = 1 ] && kind=cas-corrupt
    local file="$DATA/cas-$size-$INFO-$corrupt.jsonl"
    "$SB" bench limit "$file" --generate "$kind" --size "$size" --info "$INFO" --generate-only >&2
    # Not timed: both of our readers must build the same operations from this file.
    "$pc" --verify-reader "$file" || { echo "porcupine-check's readers disagree on $file" >&2; exit 1; }
    local sb_s=() sb_p=() sb_c=() pc_s=() pc_c=() pc_p=() sb_rss=() pc_rss=() sb_v=() pc_v=() r first s m v p c
    for ((r = 1; r <= ROUNDS; r++)); do
        for first in $([ $((r % 2)) = 1 ] && echo "sb pc" || echo "pc sb"); do
            if [ "$first" = sb ]; then
                read -r s m v p c < <(SPLITBRAIN_CHECK_PROFILE=1 run sb "$SB" check "$file" --model cas-register --format json --check-time-limit 1800)
                sb_s+=("$s") sb_rss+=("$m") sb_v+=("$v") sb_p+=("$p") sb_c+=("$c")
            else
                read -r s m v p c < <(run pc "$pc" --reader "$PC_READER" --timeout "$TIMEOUT" "$file")
                pc_s+=("$s") pc_rss+=("$m") pc_v+=("$v") pc_p+=("$p") pc_c+=("$c")
            fi
            echo "$(date -u +%H:%M:%S) size $size corrupt $corrupt round $r $first: $s s, $m MB, $v (parse $p, check $c) load $(cut -d' ' -f1-3 /proc/loadavg)" >&2
        done
    done
    local sbm sbp sbc pcm pcc pcp ratio cratio
    sbm=$(printf '%s\n' "${sb_s[@]}" | minimum)
    sbp=$(printf '%s\n' "${sb_p[@]}" | grep -v '^$' | minimum || true)
    sbc=$(printf '%s\n' "${sb_c[@]}" | grep -v '^$' | minimum || true)
    pcm=$(printf '%s\n' "${pc_s[@]}" | minimum)
    pcc=$(printf '%s\n' "${pc_c[@]}" | grep -v '^-$' | minimum || true)
    pcp=$(printf '%s\n' "${pc_p[@]}" | grep -v '^-$' | minimum || true)
    local sbv pcv
    sbv=$(printf '%s\n' "${sb_v[@]}" | sort -u | paste -sd/)
    pcv=$(printf '%s\n' "${pc_v[@]}" | sort -u | paste -sd/)
    if [ "$pcv" = "$expected" ]; then
        ratio=$(awk -v a="$pcm" -v b="$sbm" 'BEGIN { if (b > 0) printf "%.1fx", a / b; else print "-" }')
        cratio=$(awk -v a="${pcc:-0}" -v b="${sbc:-0}" 'BEGIN { if (b > 0 && a > 0) printf "%.1fx", a / b; else print "-" }')
    else
        ratio=$(awk -v a="$pcm" -v b="$sbm" 'BEGIN { if (b > 0) printf "> %.1fx (not finished)", a / b; else print "-" }')
        cratio=-
    fi
    [ "$sbv" = "$expected" ] || status=1
    case $pcv in "$expected" | stopped-* | unknown) ;; *) status=1 ;; esac
    rows+=("| $size | $([ "$corrupt" = 1 ] && echo "one corrupt read" || echo generated) | $sbm | ${sbp:--} | ${sbc:--} | $(printf '%s\n' "${sb_rss[@]}" | sort -g | tail -1) | $pcm | ${pcp:--} | ${pcc:--} | $(printf '%s\n' "${pc_rss[@]}" | sort -g | tail -1) | $ratio | $cratio | $sbv | $pcv |")
    rm -f "$file"
}

load=$(cut -d' ' -f1-3 /proc/loadavg)
started=$(date -u '+%Y-%m-%d %H:%M UTC')
for size in $SIZES; do
    [ "$CORRUPT" = only ] || check_pair "$size" 0 valid
    [ "$CORRUPT" = no ] || check_pair "$size" 1 invalid
done

echo "$started to $(date -u '+%H:%M UTC'), load before: $load, after: $(cut -d' ' -f1-3 /proc/loadavg); $(go version | cut -d' ' -f3), $pc_from; Porcupine's parse by our $PC_READER reader; $INFO % info; $ROUNDS round(s) alternating, best (minimum) of each figure"
echo
echo "| ops | history | splitbrain s (total) | splitbrain read s | splitbrain check s | splitbrain peak RSS MB | porcupine s (total) | porcupine parse s (our reader) | porcupine check s | porcupine peak RSS MB | total: porcupine / splitbrain | check: porcupine / splitbrain | splitbrain verdict | porcupine verdict |"
echo "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"
printf '%s\n' "${rows[@]}"
exit $status
