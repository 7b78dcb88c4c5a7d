#!/bin/sh
# scripts/image.sh BUILD base|build|test|clean - the container images of
# the top-level Dockerfile with podman (runc), without a registry
# (make image, make image-test; docs/deploy.md).
#
#   base   debootstrap a minimal Debian 12 once (BUILD/image/bookworm-slim.tar,
#          from the host's own apt mirror), trimmed like the official slim
#          image, and import it as debian:bookworm-slim unless it is there
#   build  base, then build the runtime image (raybox:cpu; TARGET=nvidia
#          for raybox:nvidia, TARGET=test runs the test suite in the builder)
#   test   base, then build raybox:cpu with --no-cache (every project
#          layer from scratch; the imported base is reused), and smoke-test
#          it: health, one intersect answered exactly, SIGTERM -> exit 0
#   clean  remove the containers and images podman keeps in BUILD/image
#
# podman's configuration is our own (BUILD/image/containers.conf and
# storage.conf): runc with explicit ulimits, storage under BUILD/image.
# Environment: TARGET, TAG, MIRROR (the Debian mirror), SMOKE_PORT.
set -eu
BUILD=${1:?usage: scripts/image.sh BUILD base|build|test|clean}
CMD=${2:?usage: scripts/image.sh BUILD base|build|test|clean}
SRC=$(cd "$(dirname "$0")/.." && pwd)
mkdir -p "$BUILD/image"
DIR=$(cd "$BUILD/image" && pwd)
BASE=debian:bookworm-slim
TARGET=${TARGET:-cpu}
TAG=${TAG:-raybox:$TARGET}
SMOKE_PORT=${SMOKE_PORT:-18080}

say() { printf 'image: %s\n' "$*" >&2; }
die() { say "$*"; exit 1; }

[ "$(id -u)" = 0 ] ||
    die "run as root (podman's storage and debootstrap here are root's)"

# --- podman's own configuration, outside the host's /etc/containers
cat >"$DIR/containers.conf" <<EOF
[containers]
default_ulimits = ["nofile=20000:20000", "nproc=32768:32768"]
[engine]
runtime = "runc"
cgroup_manager = "cgroupfs"
events_logger = "file"
EOF
cat >"$DIR/storage.conf" <<EOF
[storage]
driver = "overlay"
graphroot = "$DIR/storage"
runroot = "$DIR/run"
EOF
export CONTAINERS_CONF="$DIR/containers.conf"
export CONTAINERS_STORAGE_CONF="$DIR/storage.conf"
podman() { command podman "$@"; }

# The first Debian bookworm mirror in the host's apt sources (deb822
# .sources first, then one-line .list files); MIRROR overrides.
host_mirror() {
    for f in /etc/apt/sources.list.d/*.sources; do
        [ -r "$f" ] || continue
        awk '/^[[:space:]]*$/ { if (u && s ~ / bookworm /) { print u; exit }
                                u = ""; s = ""; next }
             /^URIs:/ { u = $2 }
             /^Suites:/ { $1 = ""; s = $0 " " }
             END { if (u && s ~ / bookworm /) print u }' "$f"
    done
    cat /etc/apt/sources.list /etc/apt/sources.list.d/*.list 2>/dev/null |
        awk '$1 == "deb" { i = 2
                           if ($i ~ /^\[/) { while ($i !~ /\]$/) i++; i++ }
                           if ($(i + 1) == "bookworm") print $i }'
}

# BUILD/image/bookworm-slim.tar: debootstrap --variant=minbase, then what
# the official slim image leaves out (documentation, manuals, locales,
# apt's lists and caches), and dpkg told to leave them out later too.
make_base_tar() {
    mirror=${MIRROR:-$(host_mirror | head -n 1)}
    [ -n "$mirror" ] ||
        die "no Debian bookworm mirror in /etc/apt/sources*; set MIRROR=URL"
    command -v debootstrap >/dev/null || die "no debootstrap (make image-deps)"
    root="$DIR/rootfs"
    rm -rf "$root"
    say "debootstrap bookworm from $mirror (about a minute)"
    debootstrap --variant=minbase bookworm "$root" "$mirror" \
        >"$DIR/debootstrap.log" 2>&1 ||
        die "debootstrap failed: see $DIR/debootstrap.log"
    cat >"$root/etc/dpkg/dpkg.cfg.d/raybox-slim" <<'EOF'
path-exclude /usr/share/doc/*
path-include /usr/share/doc/*/copyright
path-exclude /usr/share/man/*
path-exclude /usr/share/info/*
path-exclude /usr/share/locale/*
path-exclude /usr/share/lintian/*
EOF
    cat >"$root/etc/apt/apt.conf.d/raybox-slim" <<'EOF'
APT::Install-Recommends "false";
APT::Install-Suggests "false";
Acquire::Languages "none";
DPkg::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/*.bin || true"; };
EOF
    find "$root/usr/share/doc" -mindepth 1 -not -name copyright \
        -not -type d -delete 2>/dev/null || true
    find "$root/usr/share/doc" -mindepth 1 -type d -empty -delete \
        2>/dev/null || true
    rm -rf "$root/usr/share/man"/* "$root/usr/share/info"/* \
        "$root/usr/share/locale"/* "$root/var/lib/apt/lists"/* \
        "$root/var/cache/apt"/* "$root/var/cache/debconf"/*-old \
        "$root/var/log"/*.log "$root/var/log/apt"/* "$root/tmp"/*
    tar --numeric-owner -C "$root" -cf "$DIR/bookworm-slim.tar.tmp" .
    mv "$DIR/bookworm-slim.tar.tmp" "$DIR/bookworm-slim.tar"
    rm -rf "$root"
}

base() {
    if podman image exists "$BASE"; then
        return 0
    fi
    [ -s "$DIR/bookworm-slim.tar" ] || make_base_tar
    say "importing $DIR/bookworm-slim.tar as $BASE"
    podman import --quiet "$DIR/bookworm-slim.tar" "$BASE" >/dev/null
}

# podman build of the Dockerfile's TARGET stage; extra arguments pass on.
# --network host: the stages' apt-get reaches the mirror as the host does;
# --pull=never: nothing from a registry, the base is the imported one;
# --format docker: OCI images have no HEALTHCHECK.
build() {
    base
    say "building $TAG (target $TARGET)"
    podman build --pull=never --network host --format docker --target "$TARGET" \
        -t "$TAG" "$@" -f "$SRC/Dockerfile" "$SRC"
}

smoke() {
    name=raybox-smoke-$$
    trap 'podman rm -f "$name" >/dev/null 2>&1 || true' EXIT INT TERM
    # Loopback of the host only: --net host, so the default 0.0.0.0 is
    # narrowed with --bind (and the container's --insecure stays
    # harmless); the port through RAYBOX_PORT, as the HEALTHCHECK reads it.
    podman run -d --name "$name" --net host -e RAYBOX_PORT="$SMOKE_PORT" \
        "$TAG" --bind 127.0.0.1 >/dev/null 2>"$DIR/smoke-run.log" || {
        cat "$DIR/smoke-run.log" >&2
        die "podman run $TAG failed"
    }
    url="http://127.0.0.1:$SMOKE_PORT"
    # The image's own HEALTHCHECK (rayboxd --healthcheck), run by podman.
    i=0
    until podman healthcheck run "$name" >/dev/null 2>&1; do
        i=$((i + 1))
        if [ $i -ge 120 ] || [ "$(podman inspect -f '{{.State.Running}}' \
            "$name")" != true ]; then
            podman logs "$name" >&2 || true
            die "rayboxd in $TAG did not become healthy"
        fi
        sleep 0.5
    done
    say "healthy (its HEALTHCHECK) after about $((i / 2)) s"
    # One query with a known answer (the README's): box 0, t 1 to 2.
    body='{"rays":[[0,0,0,1,0,0]],"boxes":[[1,-1,-1,2,1,1]]}'
    answer=$(python3 -c 'import sys, urllib.request as u
r = u.Request(sys.argv[1], data=sys.argv[2].encode(),
              headers={"Content-Type": "application/json"})
print(u.urlopen(r, timeout=10).read().decode())' "$url/v1/intersect" "$body") ||
        die "POST /v1/intersect failed"
    want='"hit":[true],"box":[0],"t_enter":[1.0],"t_exit":[2.0],"face":["-x"],"exit_face":["+x"]'
    case $answer in
    *"$want"*) say "intersect answered exactly" ;;
    *) die "intersect: wanted $want, got: $answer" ;;
    esac
    k0=$(date +%s%N)
    podman kill --signal TERM "$name" >/dev/null
    rc=$(timeout 20 podman wait "$name") || die "no exit within 20 s of SIGTERM"
    ms=$((($(date +%s%N) - k0) / 1000000))
    [ "$rc" = 0 ] || { podman logs "$name" >&2; die "exit $rc after SIGTERM"; }
    [ $ms -le 5000 ] || die "exit 0, but $ms ms after SIGTERM (over 5 s)"
    say "SIGTERM: exit 0 in $ms ms"
    podman logs "$name" 2>&1 | grep '"msg"' | tail -n 3 >&2
    podman rm -f "$name" >/dev/null 2>&1
    trap - EXIT
}

case $CMD in
base) base ;;
build)
    build
    podman image prune -f >/dev/null # layers the new image replaced
    ;;
test)
    t0=$(date +%s)
    build --no-cache
    t1=$(date +%s)
    smoke
    podman image prune -f >/dev/null # the builder's and replaced layers
    say "image-test passed: build $((t1 - t0)) s, all $(($(date +%s) - t0)) s"
    podman images --format '{{.Repository}}:{{.Tag}} {{.Size}}' >&2
    ;;
clean)
    podman rm -a -f >/dev/null
    podman rmi -a -f >/dev/null
    ;;
*) die "unknown command '$CMD' (base, build, test or clean)" ;;
esac
