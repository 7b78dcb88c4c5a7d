# raybox - the two commands of the README, plus bench/load/fuzz.
#   make run    install what is missing, build, serve (rayboxd)
#   make test   install what is missing, build, run every test
#   make bench-python  the Python module against C and Open3D
#   make bench-mpi  raybox-mpi: 2 ranks x 1 thread against 1 rank x 2 threads
#   make load   bounded load test of rayboxd (wrk; not part of make test)
#   make load-merge  small requests with rayboxd --merge off and on, on the
#               CPU backend and PoCL (wrk; about a minute)
#   make fuzz   libFuzzer on the request parsers (FUZZ_SECONDS each)
#   make soak-durable  SOAK_CYCLES SIGKILL-restart cycles of --data-dir
#   make gpu-report  registers, stack and spills of the kernels on NVIDIA
#               GPUs, offline (needs the CUDA toolkit's ptxas)
#   make install  build, then install into PREFIX (and DESTDIR)
#   make image    the container image (Dockerfile) with podman; image-test
#                 builds it from scratch and smoke-tests it
# CI=1 builds into build-ci with -Werror, ASan/LSan and UBSan.

# cmake's generated makefiles run inside this make: without this, each
# prints its "Entering/Leaving directory" lines.
MAKEFLAGS += --no-print-directory

BUILD ?= build
JOBS  ?= $(shell nproc 2>/dev/null || echo 2)
ARGS  ?=
PREFIX ?= /usr/local

ifeq ($(CI),1)
BUILD := build-ci
CMAKE_FLAGS += -DRAYBOX_WERROR=ON -DRAYBOX_ASAN=ON -DRAYBOX_UBSAN=ON
endif

# Debian 12 packages the build and the tests need.
DEPS = build-essential cmake pkg-config ocl-icd-opencl-dev opencl-c-headers \
       pocl-opencl-icd clinfo check libsubunit-dev libyajl-dev \
       libmicrohttpd-dev libgnutls28-dev zlib1g-dev libcurl4-openssl-dev \
       libpng-dev libopenmpi-dev openmpi-bin libembree-dev \
       python3 python3-venv python3-dev gnuplot-nox openssl help2man
# python3-venv: the build makes build/venv for test_schemathesis (its PyPI
# packages: tests/schemathesis/requirements.txt), build/venv-python for
# test_python (tests/python-requirements.txt, then python/ itself, whose
# extension needs python3-dev's headers) and build/venv-k8s for test_k8s
# (tests/k8s/requirements.txt).
# test_k8s needs kubectl (for `kubectl kustomize`): Debian's
# kubernetes-client, unless a kubectl is on PATH already (another package
# may own /usr/bin/kubectl, and the two cannot both be installed).
ifeq ($(shell command -v kubectl 2>/dev/null),)
DEPS += kubernetes-client
endif
# libopenmpi-dev and openmpi-bin (above) build raybox-mpi and run
# test_mpi (mpiexec on this machine).
# help2man (above) makes the man pages from the programs' --help.
# libembree-dev (above) builds raybox-bench-bvh and raybox-bench-shapes,
# the benchmarks against Embree 3, which test_bench_embree runs small.
# gnuplot-nox (above) draws raybox-bench --plot charts; the bench's tests
# draw one, so it is a test dependency too. openssl makes the self-signed
# certificate of test_http_access's HTTPS tests.
# Open3D's wheel (make bench-python) loads these system libraries.
PYBENCH_DEPS = libusb-1.0-0 libgl1 libegl1
LOAD_DEPS = wrk curl
# podman (with runc, its own configuration: scripts/image.sh) builds the
# Dockerfile; debootstrap makes its base image, as no registry is used.
IMAGE_DEPS = podman runc debootstrap python3
IMAGE_TARGET ?= cpu
# libFuzzer comes with clang's runtime libraries in Debian 12.
FUZZ_DEPS = clang libclang-rt-14-dev
FUZZ_SECONDS ?= 60
# The GPU kernel report (scripts/gpu-report.sh): clang-14 with libclc's
# nvptx64 builtins makes PTX, the CUDA toolkit's ptxas (not a Debian
# package) the machine code. Where ptxas is found, make test installs
# these too, since CMake then registers the gpu_report test.
GPU_REPORT_DEPS = clang-14 libclc-14
PTXAS := $(or $(shell command -v ptxas 2>/dev/null),$(wildcard /usr/local/cuda/bin/ptxas))
ifneq ($(PTXAS),)
DEPS += $(GPU_REPORT_DEPS)
endif

SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

.PHONY: all deps bench-baseline load-deps fuzz-deps configure build \
        run test install bench bench-python bench-mpi load load-merge \
        soak-durable \
        gpu-check-fetch gpu-report-deps gpu-report fuzz clean image-deps \
        image image-test image-clean

all: build

# apt-get update runs once, and only when something is missing.
define install_missing
	@missing=""; for p in $(1); do \
	  dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q 'ok installed' \
	    || missing="$$missing $$p"; \
	done; \
	if [ -n "$$missing" ]; then \
	  echo "installing:$$missing"; \
	  $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get update -q && \
	  $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -q \
	    --no-install-recommends $$missing; \
	fi
endef

deps:
	$(call install_missing,$(DEPS))

load-deps: deps
	$(call install_missing,$(LOAD_DEPS))

fuzz-deps: deps
	$(call install_missing,$(FUZZ_DEPS))

image-deps:
	$(call install_missing,$(IMAGE_DEPS))

gpu-report-deps: deps
	$(call install_missing,$(GPU_REPORT_DEPS))

configure: deps
	cmake -S . -B $(BUILD) $(CMAKE_FLAGS)

build: configure
	cmake --build $(BUILD) -j $(JOBS)

# Only what serving needs (not the tests and their venv).
run: configure
	cmake --build $(BUILD) -j $(JOBS) --target rayboxd
	$(BUILD)/bin/rayboxd $(ARGS)

test: build
	cd $(BUILD) && ctest --output-on-failure --timeout 1200 -j 2

# The header, libraybox.a/.so, raybox.pc, the CMake package and the
# programs under PREFIX (raybox.pc is written for it when installed).
install: build
	DESTDIR="$(DESTDIR)" cmake --install $(BUILD) --prefix "$(PREFIX)"

# raybox-bench (devices, brute force), then raybox-bench-bvh (hierarchies
# against Embree 3, and the OpenCL walk; BVH_ARGS are its options), then
# raybox-bench-shapes (obbs, xboxes, spheres, a mix against Embree 3;
# SHAPES_ARGS, by default a 100K-element, 256K-ray pass of about a minute:
# docs/benchmarks-shapes.md gives the full command). Last, the ratios of
# all three (rows in BENCH_OUT) against the committed baseline of ratios,
# better/worse per row beyond RATIO_THRESHOLD percent; make bench-baseline
# makes that run's ratios the new baseline.
BVH_ARGS ?=
SHAPES_ARGS ?= --elements 100000 --rays 262144 --embree-quality high
BENCH_OUT ?= $(BUILD)/bench-results
RATIOS_BASELINE := tools/bench/ratios-baseline.json
RATIO_THRESHOLD ?= 10
bench: deps
	cmake -S . -B $(BUILD) $(CMAKE_FLAGS) -DRAYBOX_EMBREE=ON
	cmake --build $(BUILD) -j $(JOBS)
	mkdir -p $(BENCH_OUT)
	$(BUILD)/bin/raybox-bench $(ARGS) --json $(BENCH_OUT)/devices.json
	$(BUILD)/bin/raybox-bench-bvh $(BVH_ARGS) --rows $(BENCH_OUT)/bvh.json
	$(BUILD)/bin/raybox-bench-shapes $(SHAPES_ARGS) \
	    --rows $(BENCH_OUT)/shapes.json
	$(BUILD)/bin/raybox-bench --from $(BENCH_OUT)/devices.json \
	    --from $(BENCH_OUT)/bvh.json --from $(BENCH_OUT)/shapes.json \
	    --ratios --json $(BENCH_OUT)/ratios.json \
	    --compare $(RATIOS_BASELINE) --threshold $(RATIO_THRESHOLD)

bench-baseline:
	@test -f $(BENCH_OUT)/ratios.json || \
	    { echo "make bench-baseline: run make bench first" >&2; exit 1; }
	cp $(BENCH_OUT)/ratios.json $(RATIOS_BASELINE)

# raybox's Python module (nearest, any) against libraybox from C and
# against Open3D's RaycastingScene on the same 100K-box scene and rays
# (python/bench/bench.py; it makes BUILD/venv-bench with Open3D from PyPI;
# PYBENCH_ARGS are its options).
PYBENCH_ARGS ?=
bench-python: build
	$(call install_missing,$(PYBENCH_DEPS))
	python3 python/bench/bench.py --build $(BUILD) $(PYBENCH_ARGS)

# raybox-mpi's ranks against threads on the same cores: the 200K-box city
# of docs/batch.md, 2000 x 2000 visibility, as 1 rank x 2 threads and as
# 2 ranks x 1 thread (scripts/bench_mpi.py; BENCH_MPI_ARGS are its
# options, e.g. --cores 4).
BENCH_MPI_ARGS ?=
bench-mpi: build
	python3 scripts/bench_mpi.py --build $(BUILD) $(BENCH_MPI_ARGS)

# Bounded wrk runs against rayboxd and a minimal libmicrohttpd server, and
# the in-process rate (scripts/load.sh; LOAD_RUNS, LOAD_SECONDS, ...).
load: load-deps build
	scripts/load.sh $(BUILD)

# Small requests with --merge off and on, each backend, alternating runs
# (MERGE_RUNS, MERGE_SECONDS, MERGE_CONNECTIONS, MERGE_BACKENDS: see
# scripts/merge_load.sh).
load-merge: load-deps build
	scripts/merge_load.sh $(BUILD)

# tests/durable/run.py with many more SIGKILL cycles than make test's 15,
# then the PATCH latency with and without --data-dir (SOAK_DIR: where
# that data dir goes; the default is /tmp).
SOAK_CYCLES ?= 300
SOAK_DIR ?=
soak-durable: build
	python3 tests/durable/run.py $(BUILD)/bin/rayboxd --cycles $(SOAK_CYCLES)
	python3 tests/durable/run.py $(BUILD)/bin/rayboxd --latency \
	  $(if $(SOAK_DIR),--dir $(SOAK_DIR))

# libFuzzer targets for the JSON and the binary request parsers, each run
# for FUZZ_SECONDS; the corpus grows in build-fuzz/corpus/, crashes land in
# build-fuzz/ (clang, ASan and UBSan).
fuzz: fuzz-deps
	CC=clang cmake -S . -B build-fuzz -DCMAKE_C_COMPILER=clang -DRAYBOX_FUZZ=ON
	cmake --build build-fuzz -j $(JOBS) --target fuzz_json_request fuzz_binary_request
	@for t in json_request binary_request; do \
	  mkdir -p build-fuzz/corpus/$$t; \
	  echo "fuzz_$$t for $(FUZZ_SECONDS) s"; \
	  build-fuzz/tests/fuzz/fuzz_$$t -max_total_time=$(FUZZ_SECONDS) \
	    -print_final_stats=1 -artifact_prefix=build-fuzz/ \
	    build-fuzz/corpus/$$t tests/fuzz/seeds/$$t || exit 1; \
	done

# The image of the Dockerfile's IMAGE_TARGET stage (cpu, nvidia, or test,
# which runs the test suite inside) as raybox:IMAGE_TARGET, with podman's
# storage in BUILD/image (docs/deploy.md). image-test rebuilds raybox:cpu
# with --no-cache (the debootstrapped base is reused once imported) and
# smoke-tests it on loopback port SMOKE_PORT (18080).
image: image-deps
	$(SUDO) env TARGET=$(IMAGE_TARGET) scripts/image.sh $(BUILD) build

image-test: image-deps
	$(SUDO) env SMOKE_PORT=$(or $(SMOKE_PORT),18080) scripts/image.sh $(BUILD) test

# Removes podman's containers and images in BUILD/image (the base too).
image-clean:
	$(SUDO) scripts/image.sh $(BUILD) clean

# Every kernel as an NVIDIA GPU would compile it (sm_90 and sm_80, the
# library's own source and options): registers, stack frame, spills,
# shared memory, warps per SM; fails on spills and on stack frames over
# 512 bytes (docs/gpu.md). Without ptxas it says so and fails.
gpu-report: gpu-report-deps build
	@[ -n "$(PTXAS)" ] || { echo "make gpu-report: no ptxas (the CUDA toolkit's) in PATH or /usr/local/cuda/bin; the report needs it" >&2; exit 1; }
	PTXAS=$(PTXAS) scripts/gpu-report.sh --max-stack 512 --min-warps 32 $(BUILD)

clean:
	rm -rf build build-ci build-asan build-fuzz

# The build dependencies scripts/gpu-check.sh carries to a GPU machine
# without network, as .deb files in .debs/ (ignored by git).
gpu-check-fetch:
	scripts/gpu-check.sh fetch .debs
