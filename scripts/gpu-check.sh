#!/bin/sh
# gpu-check.sh - build raybox and check it on an NVIDIA GPU machine that has
# no network (a CUDA image: nvcc, the driver's libnvidia-opencl.so.1, maybe
# no ICD file and no ICD loader package), then benchmark it.
#
#   scripts/gpu-check.sh fetch DIR [PACKAGE...]
#       On a networked Debian 12 machine: download the build dependencies
#       (and what they need, less the C library and compiler runtime every
#       machine has) as .deb files into DIR, with a MANIFEST. Nothing is
#       installed. Keep DIR out of the repository (.debs/ is ignored).
#
#   scripts/gpu-check.sh run [--debs DIR] [--out DIR] [--work DIR]
#                            [--prebuilt BUILD_DIR] [--tests REGEX]
#                            [--bench-args 'ARGS'] [--cpu-ok]
#       On the GPU machine, never touching the network or the system:
#         1. finds libnvidia-opencl.so.1 (or $RAYBOX_NVIDIA_OPENCL);
#         2. unpacks the .deb files with dpkg-deb -x (or ar + tar) into
#            WORK/prefix and points pkg-config, CMake and the loader at it;
#         3. writes WORK/icd/nvidia.icd naming the driver and sets
#            OCL_ICD_VENDORS to that directory (other vendors' .icd files
#            from /etc/OpenCL/vendors, or $GPU_CHECK_VENDORS_DIR, are
#            copied beside it);
#         4. builds raybox (skipped with --prebuilt);
#         5. fails (exit 3) unless an OpenCL GPU is listed;
#         6. runs the OpenCL test suites (ctest -R REGEX);
#         7. runs raybox-bench --quick --json/--csv.
#       Results land in OUT (default ./gpu-check-out): summary.txt,
#       steps.log, devices.txt, tests.log, bench.txt, bench.json, bench.csv.
#       The prefix and the build go to WORK (default /tmp/raybox-gpu-check).
#       --cpu-ok accepts an OpenCL CPU device (PoCL) when there is no GPU,
#       so every step can be exercised on a machine without one;
#       --bench-args adds options to raybox-bench (e.g. smaller sizes).
#
# Every step runs under `timeout`; nothing waits forever. Step limits (in
# seconds) can be changed with GPU_CHECK_TIMEOUT_<STEP> (UNPACK, CONFIGURE,
# BUILD, PROBE, TESTS, BENCH).
#
# Exit status: 0 all passed; 1 a step failed or timed out; 2 usage; 3 no
# NVIDIA OpenCL driver or no OpenCL GPU; 4 a tool this machine needs is
# missing.
set -u

ME=gpu-check
say() { printf '[%s] %s\n' "$ME" "$*" >&2; }
die() { code=$1; shift; say "error: $*"; exit "$code"; }

# The packages raybox's build and tests need from Debian 12 (the Makefile's
# DEPS less the compiler and cmake, which a CUDA image has).
BUILD_PACKAGES="ocl-icd-libopencl1 ocl-icd-opencl-dev opencl-c-headers
check libsubunit0 libsubunit-dev libyajl2 libyajl-dev libmicrohttpd12
libmicrohttpd-dev libcurl4-openssl-dev pkgconf pkg-config"
# Never carried: the C library, the compiler runtime and other parts every
# Linux system has in its own (possibly newer) version. Unpacking Debian's
# into the loader path could shadow the host's.
NEVER="libc6 libc6-dev libc-dev-bin linux-libc-dev libcrypt1 libcrypt-dev
libgcc-s1 gcc-12-base libstdc++6 libnsl2 libnsl-dev libtirpc3 libtirpc-dev
libtirpc-common rpcsvc-proto mawk debconf zlib1g"

usage() {
    sed -n '2,/^$/s/^# \{0,1\}//p' "$0" >&2
    exit 2
}

# ---------------------------------------------------------------------------
# fetch
# ---------------------------------------------------------------------------
fetch() {
    [ $# -ge 1 ] || usage
    dir=$1
    shift
    command -v apt-get >/dev/null 2>&1 && command -v apt-cache >/dev/null 2>&1 ||
        die 4 "fetch needs apt-get and apt-cache (a Debian 12 machine)"
    if [ -r /etc/os-release ] && ! grep -q 'VERSION_CODENAME=bookworm' /etc/os-release; then
        say "warning: this is not Debian 12 (bookworm); the packages must come from bookworm"
    fi
    mkdir -p "$dir" || die 1 "cannot create $dir"
    dir=$(cd "$dir" && pwd)
    # shellcheck disable=SC2086
    closure=$(timeout 120 apt-cache depends --recurse --no-recommends \
        --no-suggests --no-conflicts --no-breaks --no-replaces --no-enhances \
        $BUILD_PACKAGES "$@" | grep '^[a-z0-9]' | sort -u) ||
        die 1 "apt-cache depends failed (run apt-get update first?)"
    wanted=""
    for p in $closure; do
        case " $(echo $NEVER) " in *" $p "*) continue ;; esac
        wanted="$wanted $p"
    done
    say "downloading $(echo "$wanted" | wc -w | tr -d ' ') packages into $dir"
    # apt-get download writes into the current directory.
    # shellcheck disable=SC2086
    (cd "$dir" && timeout 600 apt-get download -q $wanted) >"$dir/fetch.log" 2>&1 ||
        { tail -5 "$dir/fetch.log" >&2; die 1 "apt-get download failed (see $dir/fetch.log; apt-get update first?)"; }
    (cd "$dir" && for f in *.deb; do
        printf '%s %s\n' "$(dpkg-deb -f "$f" Package)" "$(dpkg-deb -f "$f" Version)"
    done && sha256sum ./*.deb) >"$dir/MANIFEST.txt"
    total=$(du -sh "$dir" | cut -f1)
    say "done: $(ls "$dir"/*.deb | wc -l) .deb files, $total, listed in $dir/MANIFEST.txt"
}

# ---------------------------------------------------------------------------
# run
# ---------------------------------------------------------------------------
limit() { # the timeout of a step: GPU_CHECK_TIMEOUT_<NAME> or the default
    eval "v=\${GPU_CHECK_TIMEOUT_$1:-}"
    echo "${v:-$2}"
}

# step NAME SECONDS CMD...: runs CMD under a timeout, its output appended to
# steps.log; stops the whole check on failure with the log's last lines.
step() {
    name=$1 secs=$2
    shift 2
    say "$name ..."
    printf '\n==== %s (limit %ss): %s\n' "$name" "$secs" "$*" >>"$LOG"
    t0=$(date +%s)
    timeout -k 10 "$secs" "$@" >>"$LOG" 2>&1
    rc=$?
    t1=$(date +%s)
    if [ $rc -eq 124 ] || [ $rc -eq 137 ]; then
        printf 'step %s: timed out after %s s\n' "$name" "$secs" >>"$SUMMARY"
        tail -15 "$LOG" >&2
        die 1 "$name timed out after $secs s (see $LOG)"
    fi
    if [ $rc -ne 0 ]; then
        printf 'step %s: failed, exit %s\n' "$name" "$rc" >>"$SUMMARY"
        tail -25 "$LOG" >&2
        die 1 "$name failed with exit status $rc (see $LOG)"
    fi
    printf 'step %s: ok (%s s)\n' "$name" "$((t1 - t0))" >>"$SUMMARY"
    say "$name ok ($((t1 - t0)) s)"
}

find_driver() {
    if [ -n "${RAYBOX_NVIDIA_OPENCL:-}" ]; then
        [ -r "$RAYBOX_NVIDIA_OPENCL" ] && { echo "$RAYBOX_NVIDIA_OPENCL"; return 0; }
        return 1
    fi
    p=$(ldconfig -p 2>/dev/null | awk '/libnvidia-opencl\.so\.1 /{print $NF; exit}')
    [ -n "$p" ] && [ -r "$p" ] && { echo "$p"; return 0; }
    for d in /usr/local/nvidia/lib64 /usr/local/nvidia/lib \
             /usr/lib/x86_64-linux-gnu /usr/lib64 /usr/lib \
             /usr/local/cuda/lib64 /usr/local/cuda/compat /usr/lib/wsl/lib; do
        [ -r "$d/libnvidia-opencl.so.1" ] && { echo "$d/libnvidia-opencl.so.1"; return 0; }
    done
    return 1
}

# Unpacks one .deb into $PREFIX without dpkg's database.
unpack_deb() {
    if command -v dpkg-deb >/dev/null 2>&1; then
        dpkg-deb -x "$1" "$PREFIX"
        return
    fi
    member=$(ar t "$1" | grep '^data\.tar') || return 1
    case $member in
        *.xz) ar p "$1" "$member" | xz -dc | tar -x -C "$PREFIX" ;;
        *.zst) ar p "$1" "$member" | zstd -dc | tar -x -C "$PREFIX" ;;
        *.gz) ar p "$1" "$member" | gzip -dc | tar -x -C "$PREFIX" ;;
        *) ar p "$1" "$member" | tar -x -C "$PREFIX" ;;
    esac
}

unpack_all() { # DEBS PREFIX (run as `gpu-check.sh _unpack`, under timeout)
    DEBS=$1 PREFIX=$2
    for f in "$DEBS"/*.deb; do
        unpack_deb "$f" || { echo "cannot unpack $f"; return 1; }
    done
    # Library symlinks inside the prefix are relative; nothing to fix.
    echo "unpacked $(ls "$DEBS"/*.deb | wc -l) packages into $PREFIX"
}

version_ge() { # version_ge A B: A >= B (dotted numbers)
    [ "$(printf '%s\n%s\n' "$2" "$1" | sort -V | head -1)" = "$2" ]
}

run() {
    DEBS="" OUT="gpu-check-out" WORK="" PREBUILT="" CPU_OK=0 BENCH_ARGS=""
    TESTS='^test_(vectors|differential|validate|failures|opencl)'
    while [ $# -gt 0 ]; do
        case $1 in
            --debs) DEBS=$2; shift 2 ;;
            --out) OUT=$2; shift 2 ;;
            --work) WORK=$2; shift 2 ;;
            --prebuilt) PREBUILT=$2; shift 2 ;;
            --tests) TESTS=$2; shift 2 ;;
            --bench-args) BENCH_ARGS=$2; shift 2 ;;
            --cpu-ok) CPU_OK=1; shift ;;
            -h|--help) usage ;;
            *) say "unknown option '$1'"; usage ;;
        esac
    done
    REPO=$(cd "$(dirname "$0")/.." && pwd)
    mkdir -p "$OUT" || die 1 "cannot create $OUT"
    OUT=$(cd "$OUT" && pwd)
    [ -n "$WORK" ] || WORK="${TMPDIR:-/tmp}/raybox-gpu-check"
    mkdir -p "$WORK" || die 1 "cannot create $WORK"
    WORK=$(cd "$WORK" && pwd)
    LOG="$OUT/steps.log" SUMMARY="$OUT/summary.txt"
    : >"$LOG"
    {
        echo "raybox gpu-check, $(date -u +%Y-%m-%dT%H:%M:%SZ)"
        echo "repository: $REPO ($(git -C "$REPO" describe --always --dirty 2>/dev/null || echo unknown))"
        echo "machine: $(uname -srm), $(nproc 2>/dev/null || echo '?') cores"
    } >"$SUMMARY"

    # 1. The driver: without it there is no OpenCL GPU to check.
    command -v timeout >/dev/null 2>&1 || die 4 "the 'timeout' command (coreutils) is missing"
    if ! DRIVER=$(find_driver); then
        DRIVER=""
        if [ $CPU_OK -eq 0 ]; then
            echo "result: no NVIDIA OpenCL driver" >>"$SUMMARY"
            die 3 "no NVIDIA OpenCL driver (libnvidia-opencl.so.1) found: this machine has no OpenCL GPU to check (set RAYBOX_NVIDIA_OPENCL=/path/to/libnvidia-opencl.so.1 if it is somewhere else)"
        fi
        say "no NVIDIA OpenCL driver; --cpu-ok: the system's OpenCL devices only"
    fi
    say "driver: ${DRIVER:-none}"
    echo "driver: ${DRIVER:-none (--cpu-ok)}" >>"$SUMMARY"
    if command -v nvidia-smi >/dev/null 2>&1; then
        timeout 20 nvidia-smi -L >>"$SUMMARY" 2>&1
        timeout 20 nvidia-smi --query-gpu=driver_version --format=csv,noheader \
            2>/dev/null | sed 's/^/nvidia driver: /' >>"$SUMMARY"
    fi

    # 2. Tools.
    CC_BIN=${CC:-}
    [ -n "$CC_BIN" ] || CC_BIN=$(command -v cc || command -v gcc || true)
    if [ -z "$PREBUILT" ]; then
        [ -n "$CC_BIN" ] || die 4 "no C compiler (cc or gcc) on PATH"
        command -v cmake >/dev/null 2>&1 || die 4 "cmake 3.20+ is missing (fetch it too: scripts/gpu-check.sh fetch DIR cmake)"
        cv=$(cmake --version | awk 'NR==1{print $3}')
        version_ge "$cv" 3.20 || die 4 "cmake $cv is older than 3.20"
        if command -v make >/dev/null 2>&1; then GEN="Unix Makefiles"
        elif command -v ninja >/dev/null 2>&1; then GEN="Ninja"
        else die 4 "neither make nor ninja on PATH"; fi
    fi

    # 3. The carried packages.
    PREFIX="$WORK/prefix"
    if [ -n "$DEBS" ]; then
        ls "$DEBS"/*.deb >/dev/null 2>&1 || die 2 "--debs $DEBS holds no .deb files (scripts/gpu-check.sh fetch $DEBS)"
        DEBS=$(cd "$DEBS" && pwd)
        command -v dpkg-deb >/dev/null 2>&1 || command -v ar >/dev/null 2>&1 ||
            die 4 "neither dpkg-deb nor ar to unpack .deb files"
        rm -rf "$PREFIX" && mkdir -p "$PREFIX"
        step unpack "$(limit UNPACK 300)" sh "$0" _unpack "$DEBS" "$PREFIX"
        MA=x86_64-linux-gnu
        LIBS="$PREFIX/usr/lib/$MA:$PREFIX/lib/$MA:$PREFIX/usr/lib"
        export LD_LIBRARY_PATH="$LIBS${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
        export LIBRARY_PATH="$LIBS${LIBRARY_PATH:+:$LIBRARY_PATH}"
        export PATH="$PATH:$PREFIX/usr/bin"
        # Only the prefix's .pc files, their paths rebased into the prefix.
        export PKG_CONFIG_LIBDIR="$PREFIX/usr/lib/$MA/pkgconfig:$PREFIX/usr/share/pkgconfig:$PREFIX/usr/lib/pkgconfig"
        export PKG_CONFIG_SYSROOT_DIR="$PREFIX"
        export CMAKE_PREFIX_PATH="$PREFIX/usr${CMAKE_PREFIX_PATH:+:$CMAKE_PREFIX_PATH}"
    fi
    # The driver's directory too: it loads libcuda.so.1 from beside it.
    [ -z "$DRIVER" ] ||
        export LD_LIBRARY_PATH="${LD_LIBRARY_PATH:+$LD_LIBRARY_PATH:}$(dirname "$DRIVER")"

    # 4. The driver made visible to the ICD loader, nothing installed.
    ICD="$WORK/icd"
    rm -rf "$ICD" && mkdir -p "$ICD"
    for f in "${GPU_CHECK_VENDORS_DIR:-/etc/OpenCL/vendors}"/*.icd; do
        [ -r "$f" ] && cp "$f" "$ICD/"
    done
    if [ -n "$DRIVER" ] && ! grep -qs 'libnvidia-opencl' "$ICD"/*.icd; then
        echo "$DRIVER" >"$ICD/nvidia.icd"
    fi
    export OCL_ICD_VENDORS="$ICD" OPENCL_VENDOR_PATH="$ICD"
    export RAYBOX_CACHE_DIR="$WORK/raybox-cache" POCL_CACHE_DIR="$WORK/pocl-cache"
    echo "OCL_ICD_VENDORS=$ICD: $(cat "$ICD"/*.icd 2>/dev/null | tr '\n' ' ')" >>"$SUMMARY"

    # 5. Build.
    if [ -n "$PREBUILT" ]; then
        BUILD=$(cd "$PREBUILT" && pwd) || die 2 "--prebuilt $PREBUILT: no such directory"
        [ -x "$BUILD/bin/raybox-bench" ] || die 2 "--prebuilt $BUILD has no bin/raybox-bench"
    else
        BUILD="$WORK/build"
        set -- -S "$REPO" -B "$BUILD" -G "$GEN" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
            -DCMAKE_C_COMPILER="$CC_BIN"
        if [ -n "$DEBS" ]; then
            PKGCONF=$(command -v pkg-config || command -v pkgconf || true)
            [ -n "$PKGCONF" ] && set -- "$@" -DPKG_CONFIG_EXECUTABLE="$PKGCONF"
            if [ -e "$PREFIX/usr/lib/$MA/libOpenCL.so" ]; then
                set -- "$@" -DOpenCL_INCLUDE_DIR="$PREFIX/usr/include" \
                    -DOpenCL_LIBRARY="$PREFIX/usr/lib/$MA/libOpenCL.so"
            fi
        fi
        step configure "$(limit CONFIGURE 300)" cmake "$@"
        step build "$(limit BUILD 900)" cmake --build "$BUILD" -j "$(nproc 2>/dev/null || echo 4)"
    fi

    # 6. An OpenCL GPU, or a clear no.
    step probe "$(limit PROBE 120)" sh -c "'$BUILD/bin/raybox-bench' --list >'$OUT/devices.txt' 2>&1"
    cat "$OUT/devices.txt" >>"$SUMMARY"
    want='gpu|accelerator'
    [ $CPU_OK -eq 0 ] || want='gpu|accelerator|cpu'
    if ! grep -Eq "^[0-9]+ +opencl +($want) " "$OUT/devices.txt"; then
        echo "result: no OpenCL GPU" >>"$SUMMARY"
        sed 's/^/  /' "$OUT/devices.txt" >&2
        die 3 "no OpenCL GPU found through the ICD loader (driver $DRIVER; devices above; OCL_ICD_DEBUG=7 shows why the driver did not load)"
    fi

    # 7. The OpenCL test suites, then the benchmark. A failure is recorded
    # and the benchmark still runs, so one visit to the machine gives both.
    status=0
    say "tests ..."
    t0=$(date +%s)
    (cd "$BUILD" && timeout -k 10 "$(limit TESTS 1500)" ctest --output-on-failure \
        --timeout 900 -j 4 -R "$TESTS") >"$OUT/tests.log" 2>&1
    rc=$?
    tail -3 "$OUT/tests.log" | sed 's/^/  /' >&2
    printf 'step tests: exit %s (%s s): %s\n' "$rc" "$(( $(date +%s) - t0 ))" \
        "$(grep -E 'tests passed|tests failed' "$OUT/tests.log" | tail -1)" >>"$SUMMARY"
    [ $rc -eq 0 ] || { status=1; say "tests failed (exit $rc; see $OUT/tests.log)"; }

    say "bench ..."
    t0=$(date +%s)
    # shellcheck disable=SC2086
    timeout -k 10 "$(limit BENCH 600)" "$BUILD/bin/raybox-bench" --quick \
        $BENCH_ARGS --json "$OUT/bench.json" --csv "$OUT/bench.csv" \
        >"$OUT/bench.txt" 2>>"$LOG"
    rc=$?
    printf 'step bench: exit %s (%s s)\n' "$rc" "$(( $(date +%s) - t0 ))" >>"$SUMMARY"
    sed -n '/^summary/,$p' "$OUT/bench.txt" >>"$SUMMARY"
    [ $rc -eq 0 ] || { status=1; say "raybox-bench exited $rc (see $OUT/bench.txt)"; }

    if [ $status -eq 0 ]; then
        echo "result: ok" >>"$SUMMARY"
        say "all passed; results in $OUT"
    else
        echo "result: FAILED" >>"$SUMMARY"
        say "some checks failed; results in $OUT"
    fi
    return $status
}

case ${1:-} in
    fetch) shift; fetch "$@" ;;
    run) shift; run "$@" ;;
    _unpack) shift; unpack_all "$@" ;;
    *) usage ;;
esac
