#!/bin/sh
# merge_load.sh - make load-merge: small requests (16 rays, nearest,
# binary, against a stored 1K-box scene: make load's small.bin) with
# rayboxd --merge off and on, on each backend, in alternating runs of the
# same invocation (off, on, off, on, ...), so a busy neighbour slows both
# alike. Each run is a fresh rayboxd; its /metrics give the backend calls
# and the requests they ran, so "launches/request" is measured, not
# inferred. Printed: every run, then per backend and setting the median
# requests/s, launches per request, p50 and p99, and on/off.
#
# usage: scripts/merge_load.sh [BUILD_DIR]
# environment: MERGE_RUNS (3), MERGE_SECONDS (5), MERGE_THREADS (2),
# MERGE_CONNECTIONS (64), MERGE_BACKENDS ("cpu opencl"), RAYBOXD_ARGS
# (extra rayboxd options for every run, e.g. "--merge-wait-us 100").
set -eu
B=${1:-build}
RUNS=${MERGE_RUNS:-3}
SECS=${MERGE_SECONDS:-5}
T=${MERGE_THREADS:-2}
C=${MERGE_CONNECTIONS:-64}
BACKENDS=${MERGE_BACKENDS:-cpu opencl}
HERE=$(cd "$(dirname "$0")" && pwd)
LUA="$HERE/load/post.lua"
DIR=$(mktemp -d /tmp/raybox-merge-XXXXXX)
PID=
cleanup() {
    [ -n "$PID" ] && kill "$PID" 2>/dev/null || true
    wait 2>/dev/null || true
    rm -rf "$DIR"
}
trap cleanup EXIT INT TERM

metric() { # metric PORT NAME
    curl -sf "http://127.0.0.1:$1/metrics" | awk -v n="$2" '$1 == n {print $2}'
}

median() {
    sort -g | awk '{v[NR]=$1} END {
        if (NR % 2) print v[(NR+1)/2]; else printf "%.6g\n", (v[NR/2]+v[NR/2+1])/2 }'
}

"$B/tools/raybox-loadgen" bodies "$DIR" >/dev/null
echo "merge-load: wrk -t$T -c$C -d${SECS}s, 16-ray binary nearest queries on a 1K-box scene, $RUNS runs"
for i in $(seq 1 "$RUNS"); do
    for be in $BACKENDS; do
        for m in off on; do
            log="$DIR/rayboxd-$be-$m.log"
            # shellcheck disable=SC2086
            "$B/bin/rayboxd" --port 0 --backend "$be" --merge "$m" --quiet \
                ${RAYBOXD_ARGS:-} >/dev/null 2>"$log" &
            PID=$!
            PORT=
            for _ in $(seq 1 1500); do
                PORT=$(sed -n 's/.*"msg":"listening".*"port":\([0-9]*\).*/\1/p' "$log" | head -n 1)
                [ -n "$PORT" ] && break
                kill -0 "$PID" 2>/dev/null || break
                sleep 0.02
            done
            if [ -z "$PORT" ]; then
                echo "merge-load: rayboxd --backend $be did not start" >&2
                cat "$log" >&2
                exit 1
            fi
            ID=$(curl -sf -H 'Content-Type: application/json' \
                 --data-binary "@$DIR/scene.json" "http://127.0.0.1:$PORT/v1/scenes" |
                 sed 's/.*"id":"\([^"]*\)".*/\1/')
            URL="http://127.0.0.1:$PORT/v1/scenes/$ID/intersect"
            # a warm-up (OpenCL builds its programs on the first query)
            curl -sf -H 'Content-Type: application/x-raybox' \
                 --data-binary "@$DIR/small.bin" "$URL" >/dev/null
            l0=$(metric "$PORT" raybox_query_launches_total)
            q0=$(metric "$PORT" raybox_query_launch_requests_total)
            line=$(wrk -t"$T" -c"$C" -d"${SECS}s" --timeout 60s -s "$LUA" "$URL" -- \
                   "$DIR/small.bin" application/x-raybox | grep '^RESULT')
            l1=$(metric "$PORT" raybox_query_launches_total)
            q1=$(metric "$PORT" raybox_query_launch_requests_total)
            kill "$PID"
            wait "$PID" 2>/dev/null || true
            PID=
            echo "$line" | sed 's/[a-z0-9_]*=//g; s/RESULT //' |
                awk -v l="$((l1 - l0))" -v q="$((q1 - q0))" \
                    '{printf "%.1f %.4f %d %d %d %d\n", $1/($2/1e6), (q ? l/q : 1), $5, $6, $3, $4}' \
                >>"$DIR/$be-$m"
            printf '  %-6s merge %-3s %s launches=%s requests=%s\n' "$be" "$m" \
                "$line" "$((l1 - l0))" "$((q1 - q0))"
        done
    done
done

echo
echo "summary: median of $RUNS runs"
for be in $BACKENDS; do
    for m in off on; do
        f="$DIR/$be-$m"
        printf '  %-6s merge %-3s %9.0f req/s  %.3f launches/request  p50 %s us  p99 %s us  non-2xx+errors %s\n' \
            "$be" "$m" "$(awk '{print $1}' "$f" | median)" \
            "$(awk '{print $2}' "$f" | median)" \
            "$(awk '{print $3}' "$f" | median)" "$(awk '{print $4}' "$f" | median)" \
            "$(awk '{s+=$5+$6} END {print s+0}' "$f")"
    done
    paste "$DIR/$be-on" "$DIR/$be-off" | awk '{print $1/$7}' >"$DIR/$be-ratio"
    printf '  %-6s on/off   %.2f (requests/s, median of the per-round ratios)\n' \
        "$be" "$(median <"$DIR/$be-ratio")"
done
