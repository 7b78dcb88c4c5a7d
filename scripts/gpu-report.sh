#!/bin/sh
# gpu-report.sh - what an NVIDIA GPU would make of raybox's kernels,
# offline: compiles the program libraybox builds for a GPU (the tiled
# variant, with each division a GPU may get, the library's own source and
# options from BUILD_DIR/tests/gpu_options) to PTX with clang-14 and
# libclc-14's nvptx64 builtins, then to machine code with the CUDA
# toolkit's ptxas -v for each architecture, and prints per kernel the
# registers, stack frame, spills, static shared memory and the warps per
# SM the registers allow. Fails on any spill, on a stack frame over
# --max-stack bytes, on fewer than --min-warps warps per SM (by
# registers) on the first architecture of --archs (the target; the
# others' occupancy is shown, marked "low"), and when a compile gives no
# report for every kernel. The kernels of $known are over those limits
# and known to be (docs/gpu.md): they are marked KNOWN and fail only when
# they pass their own ceiling (registers, stack frame) or spill.
#
#   scripts/gpu-report.sh [--max-stack BYTES] [--min-warps N]
#                         [--archs sm_90,sm_80] [--stack N] BUILD_DIR
#
# --stack N builds the walk with N stack entries (default: the library's).
# Tools: clang-14 and /usr/lib/clc/nvptx64--nvidiacl.bc (Debian clang-14,
# libclc-14; make gpu-report installs them), ptxas from $PTXAS, PATH or
# /usr/local/cuda/bin. clang-14 knows GPUs up to sm_86, so the PTX is made
# for sm_80 and ptxas compiles it for each architecture (as a driver
# compiles PTX for a newer GPU). __OPENCL_VERSION__ is defined as an
# OpenCL driver would. docs/gpu.md explains the figures.
set -eu
# kernel:registers:stack-bytes ceilings of kernels known to be over the
# limits, space-separated (docs/gpu.md); none are.
known=""
max_stack=512
min_warps=32
archs=sm_90,sm_80
stack=""
while [ $# -gt 0 ]; do
    case "$1" in
    --max-stack) max_stack=$2; shift 2 ;;
    --min-warps) min_warps=$2; shift 2 ;;
    --archs) archs=$2; shift 2 ;;
    --stack) stack=$2; shift 2 ;;
    -h|--help) sed -n '2,24p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    -*) echo "gpu-report.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
    *) break ;;
    esac
done
[ $# -eq 1 ] || { echo "usage: gpu-report.sh [options] BUILD_DIR (see --help)" >&2; exit 2; }
build=$1
opts_tool=$build/tests/gpu_options
CLANG=${CLANG:-clang-14}
LIBCLC=${LIBCLC:-/usr/lib/clc/nvptx64--nvidiacl.bc}
if [ -z "${PTXAS:-}" ]; then
    PTXAS=$(command -v ptxas 2>/dev/null || true)
    [ -n "$PTXAS" ] || [ ! -x /usr/local/cuda/bin/ptxas ] || PTXAS=/usr/local/cuda/bin/ptxas
fi
missing=""
need() { missing="$missing
  $1"; }
[ -x "$opts_tool" ] || need "$opts_tool (make build)"
command -v "$CLANG" >/dev/null 2>&1 || need "$CLANG (apt-get install clang-14)"
[ -f "$LIBCLC" ] || need "$LIBCLC (apt-get install libclc-14)"
[ -n "$PTXAS" ] && [ -x "$PTXAS" ] ||
    need "ptxas (the CUDA toolkit's; not in PATH nor /usr/local/cuda/bin)"
if [ -n "$missing" ]; then
    echo "gpu-report.sh: cannot make the GPU kernel report, missing:$missing" >&2
    exit 1
fi
n_kernels=$("$opts_tool" --kernels)

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$opts_tool" --source > "$tmp/raybox.cl"
echo "ptxas: $("$PTXAS" --version | tail -1)"
echo "clang: $("$CLANG" --version | head -1), libclc: $LIBCLC"
echo "limits: stack frame <= $max_stack B, 0 spills; on ${archs%%,*} >= $min_warps warps/SM by registers"
fail=0
printf '%-6s %-7s %-18s %5s %7s %7s %7s %6s %9s\n' arch div kernel regs stack spill_st spill_ld smem warps/SM
for div in exact double; do
    # shellcheck disable=SC2086
    opts=$("$opts_tool" tiled "$div" $stack)
    echo "# $div: $opts" >> "$tmp/options"
    # shellcheck disable=SC2086
    "$CLANG" -x cl -target nvptx64-unknown-nvidiacl -march=sm_80 -O2 \
        -D__OPENCL_VERSION__=120 -Xclang -finclude-default-header \
        -Xclang -mlink-builtin-bitcode -Xclang "$LIBCLC" $opts \
        -S -o "$tmp/$div.ptx" "$tmp/raybox.cl"
    for arch in $(echo "$archs" | tr ',' ' '); do
        "$PTXAS" -v -arch="$arch" -o "$tmp/$div.$arch.cubin" "$tmp/$div.ptx" \
            2> "$tmp/$div.$arch.log" || { cat "$tmp/$div.$arch.log" >&2; exit 1; }
        # Registers are allocated per warp in units of 256 (8 a thread);
        # an SM holds 65536 registers and 64 warps (sm_80, sm_90).
        target=0
        [ "$arch" = "${archs%%,*}" ] && target=1
        awk -v arch="$arch" -v div="$div" -v max_stack="$max_stack" -v target="$target" \
            -v min_warps="$min_warps" -v want="$n_kernels" -v q="'" \
            -v known="$known" '
            BEGIN {
                nk = split(known, kl, " ")
                for (i = 1; i <= nk; i++) {
                    split(kl[i], f, ":"); kr[f[1]] = f[2]; ks[f[1]] = f[3]
                }
            }
            /Compiling entry function/ { split($0, p, q); k = p[2]; next }
            /bytes stack frame/ && k != "" { st[k] = $1; ss[k] = $5; sl[k] = $9; next }
            /Used [0-9]+ registers/ && k != "" {
                for (i = 1; i <= NF; i++) {
                    if ($i == "registers,") r[k] = $(i - 1)
                    if ($i == "smem" || $i == "smem,") sm[k] = $(i - 2)
                }
                order[++n] = k; k = ""; next }
            END {
                bad = 0
                for (i = 1; i <= n; i++) {
                    k = order[i]; regs = r[k]; per_warp = int((regs * 32 + 255) / 256) * 256
                    w = int(65536 / per_warp); if (w > 64) w = 64
                    note = ""
                    if (ss[k] + sl[k] > 0) note = note " SPILLS"
                    if (k in kr) {
                        if (regs > kr[k] || st[k] > ks[k])
                            note = note " OVER ITS CEILING " kr[k] "/" ks[k]
                        if (note != "") bad = 1
                        else note = " KNOWN (over the limits, ceiling " kr[k] " regs / " ks[k] " B)"
                        printf "%-6s %-7s %-18s %5d %7d %7d %7d %6d %6d/64%s\n", arch, div, k, regs, st[k], ss[k], sl[k], sm[k] + 0, w, note
                        continue
                    }
                    if (st[k] > max_stack) note = note " STACK>" max_stack
                    if (note != "") bad = 1
                    if (w < min_warps) {
                        if (target) { note = note " OCCUPANCY<" min_warps; bad = 1 }
                        else note = note " (low occupancy)"
                    }
                    printf "%-6s %-7s %-18s %5d %7d %7d %7d %6d %6d/64%s\n", arch, div, k, regs, st[k], ss[k], sl[k], sm[k] + 0, w, note
                }
                if (n != want) { printf "%s %s: ptxas reported %d kernels, the program has %d\n", arch, div, n, want; bad = 1 }
                exit bad
            }' "$tmp/$div.$arch.log" || fail=1
    done
done
cat "$tmp/options"
if [ "$fail" -ne 0 ]; then
    echo "gpu-report.sh: FAILED (see the marked kernels above)" >&2
    exit 1
fi
echo "gpu-report.sh: every kernel within the limits (the KNOWN ones within their ceilings)"
