# Front door: `make demo` and `make test` work on a fresh Debian 12 machine (they install what is missing).
BUILD      ?= build
MAKEFLAGS  += --no-print-directory
JOBS       ?= $(shell nproc 2>/dev/null || echo 2)
CMAKE_ARGS ?=
# The test suite is configured when cmocka is installed (`make test` installs it): building never needs it.
TESTS      ?= $(shell pkg-config --exists cmocka 2>/dev/null && echo ON || echo OFF)

.PHONY: all deps test-deps build demo test test-fast bench install package clean help

all: build

help:
	@echo "make demo    install missing packages, build, run 'ktiming demo'"
	@echo "make test    build and run every test: normal, ASan+UBSan, TSan (threaded tests), fuzz smoke"
	@echo "make test-fast  the normal build's tests only"
	@echo "make bench   build and run every benchmark under bench/"
	@echo "make install PREFIX=/usr/local"
	@echo "make package the Debian packages (CPack) in $(BUILD)-deb/"
	@echo "make, make build, make demo install only what building needs; make test adds the test tools"

deps:
	@scripts/install-deps.sh

test-deps:
	@scripts/install-deps.sh --test

build: deps
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo -DKTIMING_BUILD_TESTS=$(TESTS) $(CMAKE_ARGS) >/dev/null
	cmake --build $(BUILD) -j $(JOBS)

# The demo builds the CLI and what it links, never the test suite or the benches (whatever cmocka says): the
# build tree keeps its KTIMING_BUILD_TESTS setting, only the targets built differ.
demo: deps
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo -DKTIMING_BUILD_TESTS=$(TESTS) $(CMAKE_ARGS) >/dev/null
	cmake --build $(BUILD) -j $(JOBS) --target ktiming_cli
	$(abspath $(BUILD))/bin/ktiming demo

test: test-deps
	scripts/run-tests.sh

test-fast: test-deps
	@$(MAKE) build TESTS=ON
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS)

bench: test-deps
	cmake -S . -B $(BUILD)-bench -DCMAKE_BUILD_TYPE=Release -DKTIMING_BUILD_TESTS=OFF >/dev/null
	cmake --build $(BUILD)-bench -j $(JOBS)
	@scripts/run-benches.sh $(BUILD)-bench

PREFIX ?= /usr/local
install: build
	cmake --install $(BUILD) --prefix $(PREFIX)

# The Debian packages (docs/packaging.md) come from their own build, configured for /usr as Debian builds are
# (multiarch libdir /usr/lib/<triplet>), without tests, benches or examples.
package: deps
	cmake -S . -B $(BUILD)-deb -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_INSTALL_PREFIX=/usr \
	  -DKTIMING_BUILD_TESTS=OFF -DKTIMING_BUILD_BENCH=OFF -DKTIMING_BUILD_EXAMPLES=OFF $(CMAKE_ARGS) >/dev/null
	cmake --build $(BUILD)-deb -j $(JOBS)
	cd $(BUILD)-deb && cpack -G DEB

clean:
	rm -rf $(BUILD) $(BUILD)-asan $(BUILD)-tsan $(BUILD)-bench $(BUILD)-fuzz $(BUILD)-deb
