#!/bin/sh
# test_bench_ab.sh AB LIB - raybox-bench-ab end to end on tiny scenes (no
# timing is judged): this build's libraybox.so against itself must load
# twice, give equal answers in every scene and mode and print every row;
# a path that is not a library, and bad options, must fail with a message.
set -eu
AB=$1
LIB=$2
T=$(mktemp -d "${TMPDIR:-/tmp}/raybox-ab.XXXXXX")
trap 'rm -rf "$T"' EXIT
fail() { echo "test_bench_ab: FAIL: $*" >&2; exit 1; }

# the executable must not export the library it links (else both loaded
# builds could bind to its copy instead of their own)
if nm -D "$AB" 2>/dev/null | grep -q " T rb_intersect$"; then
    fail "raybox-bench-ab exports rb_intersect"
fi

cp "$LIB" "$T/old.so"
cp "$LIB" "$T/new.so"
"$AB" "$T/old.so" "$T/new.so" --kinds box,obb,sphere,mixed --elements 2000 \
    --rays 4096 --rounds 3 --threads 2 >"$T/out.txt" 2>&1 ||
    { cat "$T/out.txt" >&2; fail "raybox-bench-ab exited $?"; }
for kind in box obb sphere mixed; do
    for mode in nearest any; do
        grep -q "^  $kind  *$mode  *[0-9.]*  *[0-9.]*  *[0-9.]*x (" \
            "$T/out.txt" || { cat "$T/out.txt" >&2; fail "no $kind $mode row"; }
    done
done
n=$(grep -c "^  mixed / box cost, .* \(old\|new\): [0-9.]*x" "$T/out.txt" || true)
[ "$n" -eq 4 ] || { cat "$T/out.txt" >&2; fail "$n mixed / box cost rows of 4"; }

if "$AB" "$T/old.so" "$T/missing.so" --rounds 3 >"$T/bad.txt" 2>&1; then
    fail "a missing library was accepted"
fi
grep -q "missing.so" "$T/bad.txt" || { cat "$T/bad.txt" >&2; fail "no message naming the missing library"; }
if "$AB" "$T/old.so" "$T/new.so" --kinds cone >"$T/bad.txt" 2>&1; then
    fail "--kinds cone was accepted"
fi
grep -q "no cone" "$T/bad.txt" || { cat "$T/bad.txt" >&2; fail "no message naming the bad kind"; }
if "$AB" "$T/old.so" "$T/new.so" --rounds 2 >"$T/bad.txt" 2>&1; then
    fail "--rounds 2 was accepted"
fi
grep -q "rounds 2: expected 3 to 1001" "$T/bad.txt" || { cat "$T/bad.txt" >&2; fail "no message naming the bad --rounds"; }
if "$AB" "$T/old.so" >"$T/bad.txt" 2>&1; then
    fail "one library was accepted"
fi
grep -q "^usage:" "$T/bad.txt" || fail "no usage for one library"
echo "test_bench_ab: ok"
