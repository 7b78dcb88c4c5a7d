# raybox images (docs/deploy.md). Targets:
#   builder  compiles rayboxd and the raybox CLI (no tests; libcurl only
#            because the configure step asks for it, for raybox-bench)
#   test     the builder plus the test dependencies; building it runs the
#            whole test suite (make test's ctest) in the image
#   cpu      the runtime: native CPU backend and PoCL (the default target)
#   nvidia   the runtime for NVIDIA GPUs: no PoCL, the NVIDIA OpenCL ICD
#            file; the driver's library comes from the NVIDIA container
#            toolkit at run time
# `make image` builds cpu with podman, `make image-test` builds it with
# --no-cache and smoke-tests it. No registry is needed: the base is
# imported under this name (scripts/image.sh base).

FROM debian:bookworm-slim AS builder
ARG DEBIAN_FRONTEND=noninteractive
RUN apt-get update -q \
 && apt-get install -y -q --no-install-recommends \
      build-essential cmake pkg-config ocl-icd-opencl-dev opencl-c-headers \
      libyajl-dev libmicrohttpd-dev libgnutls28-dev zlib1g-dev libpng-dev \
      libcurl4-openssl-dev \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY . .
# The project's build type (RelWithDebInfo), stripped when copied out.
RUN cmake -S . -B /build -DRAYBOX_BUILD_TESTS=OFF \
 && cmake --build /build -j "$(nproc)" --target rayboxd raybox_cli \
 && install -D -s -m 755 /build/bin/rayboxd /out/usr/local/bin/rayboxd \
 && install -D -s -m 755 /build/bin/raybox /out/usr/local/bin/raybox

FROM builder AS test
ARG DEBIAN_FRONTEND=noninteractive
RUN apt-get update -q \
 && apt-get install -y -q --no-install-recommends \
      pocl-opencl-icd clinfo check libsubunit-dev libcurl4-openssl-dev \
      python3 python3-venv python3-dev gnuplot-nox openssl ca-certificates \
      kubernetes-client libopenmpi-dev openmpi-bin libembree-dev \
 && rm -rf /var/lib/apt/lists/*
RUN cmake -S . -B /build-test \
 && cmake --build /build-test -j "$(nproc)" \
 && cd /build-test && ctest --output-on-failure --timeout 1200 -j 2

# What both runtimes share: the libraries rayboxd links, a user of its
# own, and a writable cache for OpenCL program binaries (RAYBOX_CACHE_DIR;
# PoCL's own cache beside it).
FROM debian:bookworm-slim AS runtime
ARG DEBIAN_FRONTEND=noninteractive
RUN apt-get update -q \
 && apt-get install -y -q --no-install-recommends \
      libmicrohttpd12 libyajl2 libpng16-16 ocl-icd-libopencl1 \
 && rm -rf /var/lib/apt/lists/* /var/cache/apt/* /var/log/apt/* \
      /var/log/dpkg.log \
 && groupadd --system --gid 10001 raybox \
 && useradd --system --uid 10001 --gid 10001 --home-dir /var/cache/raybox \
      --shell /usr/sbin/nologin raybox \
 && install -d -o raybox -g raybox -m 700 /var/cache/raybox
COPY --from=builder /out/ /
ENV RAYBOX_CACHE_DIR=/var/cache/raybox/programs \
    POCL_CACHE_DIR=/var/cache/raybox/pocl \
    RAYBOX_PORT=8080
USER raybox:raybox
WORKDIR /var/cache/raybox
EXPOSE 8080
# Health from inside the container, with rayboxd itself (no curl):
# --healthcheck GETs http://127.0.0.1:$RAYBOX_PORT/v1/health and exits 0
# on a 200 (so change the port with RAYBOX_PORT, not --port; plain HTTP
# only: with --tls-cert replace or disable this check, docs/deploy.md).
HEALTHCHECK --interval=30s --timeout=5s --start-period=60s --retries=3 \
  CMD ["rayboxd", "--healthcheck"]
# Exec form: rayboxd is PID 1 and gets SIGTERM itself (it drains, then
# exits 0). 0.0.0.0 inside the container's own network namespace, which
# is the boundary: --insecure allows that without tokens. Give it
# --auth-token-file (and TLS) before publishing the port beyond a trusted
# network (docs/deploy.md).
ENTRYPOINT ["rayboxd"]
CMD ["--bind", "0.0.0.0", "--insecure"]

FROM runtime AS nvidia
USER root
# The ICD loader opens the library the NVIDIA container toolkit mounts
# when NVIDIA_DRIVER_CAPABILITIES includes compute.
RUN mkdir -p /etc/OpenCL/vendors \
 && echo libnvidia-opencl.so.1 > /etc/OpenCL/vendors/nvidia.icd
ENV NVIDIA_VISIBLE_DEVICES=all \
    NVIDIA_DRIVER_CAPABILITIES=compute,utility
USER raybox:raybox

FROM runtime AS cpu
USER root
RUN apt-get update -q \
 && apt-get install -y -q --no-install-recommends pocl-opencl-icd \
 && rm -rf /var/lib/apt/lists/* /var/cache/apt/* /var/log/apt/* \
      /var/log/dpkg.log
USER raybox:raybox
