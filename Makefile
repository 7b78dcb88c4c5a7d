# raybox - the two commands of the README, plus bench/load/fuzz.
#   make run    install what is missing, build, serve (rayboxd)
#   make test   install what is missing, build, run every test
# CI=1 builds into build-ci with -Werror, ASan/LSan and UBSan.

BUILD ?= build
JOBS  ?= $(shell nproc 2>/dev/null || echo 2)
ARGS  ?=

ifeq ($(CI),1)
BUILD := build-ci
CMAKE_FLAGS += -DRAYBOX_WERROR=ON -DRAYBOX_ASAN=ON -DRAYBOX_UBSAN=ON
endif

# Debian 12 packages the build and the tests need.
DEPS = build-essential cmake pkg-config ocl-icd-opencl-dev opencl-c-headers \
       pocl-opencl-icd clinfo check libsubunit-dev libyajl-dev \
       libmicrohttpd-dev libcurl4-openssl-dev
# gnuplot-nox draws raybox-bench --plot charts; the bench's tests draw one.
BENCH_DEPS = libembree-dev gnuplot-nox
TEST_DEPS = gnuplot-nox
LOAD_DEPS = wrk

SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

.PHONY: all deps bench-deps test-deps load-deps configure build run test \
        bench load gpu-check-fetch \
        fuzz clean

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

bench-deps: deps
	$(call install_missing,$(BENCH_DEPS))

test-deps: deps
	$(call install_missing,$(TEST_DEPS))

load-deps: deps
	$(call install_missing,$(LOAD_DEPS))

configure: deps
	cmake -S . -B $(BUILD) $(CMAKE_FLAGS)

build: configure
	cmake --build $(BUILD) -j $(JOBS)

run: build
	$(BUILD)/bin/rayboxd $(ARGS)

test: build test-deps
	cd $(BUILD) && ctest --output-on-failure --timeout 1200 -j 2

bench: bench-deps
	cmake -S . -B $(BUILD) $(CMAKE_FLAGS) -DRAYBOX_EMBREE=ON
	cmake --build $(BUILD) -j $(JOBS)
	$(BUILD)/bin/raybox-bench $(ARGS)

clean:
	rm -rf build build-ci

# The build dependencies scripts/gpu-check.sh carries to a GPU machine
# without network, as .deb files in .debs/ (ignored by git).
gpu-check-fetch:
	scripts/gpu-check.sh fetch .debs
