#!/bin/sh
# test_install.sh BUILD_DIR SOURCE_DIR - what `make install` gives a user:
# cmake --install of this build into a temporary prefix, then
#   1. the tree: header, libraybox.a/.so (VERSION, SOVERSION), raybox.pc,
#      the CMake package, the three programs and nothing else in bin/,
#      and their man pages (from --help);
#   2. libraybox.so exports the RB_API calls of raybox.h and nothing else;
#   3. tests/consumers/consumer.c built with pkg-config, shared and static
#      (--static), and run;
#   4. the README's library example, cut out of README.md, built with the
#      link line printed under it, and run;
#   5. tests/consumers/cmake, a project of its own, with
#      find_package(raybox): raybox::raybox and raybox::raybox_static.
# The consumers get -Wall -Wextra -Werror and RAYBOX_CONSUMER_FLAGS (the
# build's sanitizers). CC and CMAKE name the tools (ctest sets them).
set -eu
BUILD=$(cd "$1" && pwd)
SRC=$(cd "$2" && pwd)
CC=${CC:-cc}
CMAKE=${CMAKE:-cmake}
SAN=${RAYBOX_CONSUMER_FLAGS:-}
FLAGS="-std=c11 -Wall -Wextra -Werror $SAN"

T=$(mktemp -d "${TMPDIR:-/tmp}/raybox-install.XXXXXX")
trap 'rm -rf "$T"' EXIT
P=$T/prefix

say() { echo "test_install: $*"; }
fail() { echo "test_install: FAIL: $*" >&2; exit 1; }
# run LOG CMD...: runs CMD, output to LOG, shown when it fails.
run() {
    log=$1; shift
    "$@" >"$log" 2>&1 || { cat "$log" >&2; fail "$*"; }
}

VERSION=$(sed -n 's/^#define RB_VERSION_STRING "\(.*\)"$/\1/p' "$SRC/include/raybox.h")
MAJOR=${VERSION%%.*}
[ -n "$VERSION" ] || fail "no RB_VERSION_STRING in raybox.h"

# The build's bin/ holds programs only.
for f in "$BUILD"/bin/test_*; do
    [ -e "$f" ] && fail "test executable in $BUILD/bin: $f"
done

say "cmake --install $BUILD --prefix $P"
run "$T/install.log" "$CMAKE" --install "$BUILD" --prefix "$P"

# 1. The tree.
a=$(find "$P" -name libraybox.a)
[ -n "$a" ] || fail "no libraybox.a under $P"
LIB=$(dirname "$a")
for f in include/raybox.h bin/rayboxd bin/raybox bin/raybox-bench; do
    [ -f "$P/$f" ] || fail "missing $f"
done
for f in libraybox.so libraybox.so."$MAJOR" libraybox.so."$VERSION" \
         pkgconfig/raybox.pc cmake/raybox/rayboxConfig.cmake \
         cmake/raybox/rayboxConfigVersion.cmake \
         cmake/raybox/raybox-targets.cmake; do
    [ -e "$LIB/$f" ] || fail "missing ${LIB#"$P"/}/$f"
done
bins=$(cd "$P/bin" && echo *)
progs="raybox raybox-bench rayboxd"
# raybox-mpi is built (and installed) where CMake found MPI.
[ -x "$BUILD/bin/raybox-mpi" ] && progs="raybox raybox-bench raybox-mpi rayboxd"
[ "$bins" = "$progs" ] || fail "bin/ holds: $bins (expected $progs)"
soname=$(readelf -d "$LIB/libraybox.so.$VERSION" | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')
[ "$soname" = "libraybox.so.$MAJOR" ] || fail "SONAME is '$soname'"
"$P/bin/raybox" --help >/dev/null 2>&1 || fail "installed raybox --help"
# Man pages from the programs' --help (help2man, a build dependency).
for m in $progs; do
    page="$P/share/man/man1/$m.1"
    [ -f "$page" ] || fail "missing share/man/man1/$m.1"
    grep -q "usage" "$page" || fail "$m.1 does not hold the --help text"
done
grep -qF 'data\-dir' "$P/share/man/man1/rayboxd.1" ||
    fail "rayboxd.1 lacks --data-dir, an option of rayboxd --help"

# 2. Exported symbols = the header's RB_API calls.
sed -n 's/^RB_API [^(]*[ *]\(rb_[a-z0-9_]*\)(.*/\1/p' "$SRC/include/raybox.h" |
    sort >"$T/api"
[ -s "$T/api" ] || fail "no RB_API declarations in raybox.h"
nm -D --defined-only "$LIB/libraybox.so" | awk '{print $NF}' |
    grep -v -x -e _init -e _fini | sort >"$T/exported"
if ! cmp -s "$T/api" "$T/exported"; then
    diff "$T/api" "$T/exported" >&2 || true
    fail "libraybox.so exports other symbols than raybox.h's RB_API calls (< api, > exported)"
fi
say "libraybox.so.$VERSION (SONAME $soname) exports the $(wc -l <"$T/api") RB_API calls"

# 3. pkg-config.
PKG_CONFIG_PATH=$LIB/pkgconfig
export PKG_CONFIG_PATH
[ "$(pkg-config --modversion raybox)" = "$VERSION" ] || fail "pkg-config --modversion"
[ "$(pkg-config --variable=prefix raybox)" = "$P" ] || fail "raybox.pc prefix is not $P"
# shellcheck disable=SC2046,SC2086
run "$T/cc.log" $CC $FLAGS "$SRC/tests/consumers/consumer.c" \
    $(pkg-config --cflags --libs raybox) -o "$T/pc_shared"
readelf -d "$T/pc_shared" | grep -q "NEEDED.*\[libraybox\.so\.$MAJOR\]" ||
    fail "the pkg-config consumer does not load libraybox.so.$MAJOR"
run "$T/run.log" env LD_LIBRARY_PATH="$LIB" "$T/pc_shared"
say "pkg-config, shared: $(cat "$T/run.log")"
# --static: Libs.private must be enough for libraybox.a.
# shellcheck disable=SC2046,SC2086
run "$T/cc.log" $CC $FLAGS "$SRC/tests/consumers/consumer.c" \
    $(pkg-config --cflags raybox) \
    $(pkg-config --static --libs raybox | sed 's/-lraybox\b/-l:libraybox.a/') \
    -o "$T/pc_static"
readelf -d "$T/pc_static" | grep -q "NEEDED.*libraybox" &&
    fail "the --static consumer loads libraybox.so"
run "$T/run.log" "$T/pc_static"
say "pkg-config --static: $(cat "$T/run.log")"

# 4. The README's example and the link line shown with it.
awk '/^## The library/ { lib = 1 }
     lib && /^```c$/ { code = 1; next }
     code && /^```$/ { exit }
     code { print }' "$SRC/README.md" >"$T/app.c"
[ -s "$T/app.c" ] || fail "no C example under README.md's 'The library'"
line=$(awk '/^## The library/ { lib = 1 }
            lib && /^cc .*app\.c/ { print; exit }' "$SRC/README.md")
[ -n "$line" ] || fail "no 'cc ... app.c' link line under README.md's example"
say "README: $line"
(
    cd "$T"
    # shellcheck disable=SC2016 # $CC and $FLAGS are for the eval
    cmd=$(printf '%s\n' "$line" | sed 's/#.*//; s/^cc /$CC $FLAGS /')
    eval "$cmd"
) >"$T/cc.log" 2>&1 || { cat "$T/cc.log" >&2; fail "the README example does not build: $line"; }
run "$T/run.log" env LD_LIBRARY_PATH="$LIB" "$T/app"
grep -q "box 1" "$T/run.log" || { cat "$T/run.log" >&2; fail "the README example's answer"; }
say "README example: $(cat "$T/run.log")"

# 5. find_package(raybox) in a project of its own.
run "$T/cmake.log" "$CMAKE" -S "$SRC/tests/consumers/cmake" -B "$T/cmake-build" \
    -DCMAKE_PREFIX_PATH="$P" -DCMAKE_C_COMPILER="$CC" \
    -DCMAKE_C_FLAGS="$FLAGS" -DCMAKE_BUILD_TYPE=Release
run "$T/cmake.log" "$CMAKE" --build "$T/cmake-build"
readelf -d "$T/cmake-build/consumer" | grep -q "NEEDED.*\[libraybox\.so\.$MAJOR\]" ||
    fail "raybox::raybox is not libraybox.so.$MAJOR"
run "$T/run.log" "$T/cmake-build/consumer"
say "find_package, raybox::raybox: $(cat "$T/run.log")"
run "$T/run.log" "$T/cmake-build/consumer_static"
say "find_package, raybox::raybox_static: $(cat "$T/run.log")"
say "ok"
