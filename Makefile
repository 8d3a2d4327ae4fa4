# Front door: `make demo` and `make test` work on a fresh Debian 12 machine (they install what is missing).
BUILD      ?= build
MAKEFLAGS  += --no-print-directory
JOBS       ?= $(shell nproc 2>/dev/null || echo 2)
CMAKE_ARGS ?=

.PHONY: all deps build demo test test-fast bench install clean help

all: build

help:
	@echo "make demo    install missing packages, build, run 'ktiming demo'"
	@echo "make test    build and run every test: normal, ASan+UBSan, TSan (threaded tests), fuzz smoke"
	@echo "make test-fast  the normal build's tests only"
	@echo "make bench   build and run every benchmark under bench/"
	@echo "make install PREFIX=/usr/local"

deps:
	@scripts/install-deps.sh

build: deps
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo $(CMAKE_ARGS) >/dev/null
	cmake --build $(BUILD) -j $(JOBS)

demo: build
	./$(BUILD)/tools/ktiming/ktiming demo

test: deps
	scripts/run-tests.sh

test-fast: build
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS)

bench: deps
	cmake -S . -B $(BUILD)-bench -DCMAKE_BUILD_TYPE=Release -DKTIMING_BUILD_TESTS=OFF >/dev/null
	cmake --build $(BUILD)-bench -j $(JOBS)
	@scripts/run-benches.sh $(BUILD)-bench

PREFIX ?= /usr/local
install: build
	cmake --install $(BUILD) --prefix $(PREFIX)

clean:
	rm -rf $(BUILD) $(BUILD)-asan $(BUILD)-tsan $(BUILD)-bench $(BUILD)-fuzz
