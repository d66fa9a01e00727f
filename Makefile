# karui — `make` builds the library alone (build-lib/lib: libkarui.a,
# libkarui.so) and `make install PREFIX=...` installs it; they need only a C
# compiler, CMake and liburing, and install no package.  `make test` runs the
# whole suite, `make demo` the experiments and their report (report/REPORT.md):
# both install the Debian packages they need first (scripts/deps.sh) and build
# everything in build/.

BUILD   := build
LIB     := build-lib
ASAN    := build-asan
TSAN    := build-tsan
ARM     := build-aarch64
CMAKE   := cmake -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo
CTEST   := ctest --output-on-failure --timeout 900
PREFIX  ?= /usr/local
export PATH := $(PATH):/usr/local/go/bin

# The library alone: Ninja when there is one, else CMake's default generator.
LIBCMAKE := cmake $(if $(shell command -v ninja 2>/dev/null),-G Ninja) \
	-DCMAKE_BUILD_TYPE=RelWithDebInfo -DKARUI_BUILD_TESTS=OFF \
	-DKARUI_BUILD_EXAMPLES=OFF -DKARUI_BENCH=OFF -DKARUI_INSTALL=ON

.PHONY: all lib install deps build test test-native test-asan test-tsan test-aarch64 demo bench clean

all: lib

lib:
	@$(LIBCMAKE) -S . -B $(LIB) >/dev/null
	@cmake --build $(LIB) --parallel

# headers, libkarui.so.2 and libkarui.a, karui.pc and the CMake package
install:
	@$(LIBCMAKE) -S . -B $(LIB) -DCMAKE_INSTALL_PREFIX=$(abspath $(PREFIX)) >/dev/null
	@cmake --build $(LIB) --parallel
	@cmake --install $(LIB)

deps:
	@scripts/deps.sh

build: deps
	@$(CMAKE) -S . -B $(BUILD) >/dev/null
	@cmake --build $(BUILD)

# The suite three times: native, AddressSanitizer + UBSan, and aarch64 under
# qemu-user; each ends with ctest's "N tests failed out of M" line.  Then
# the suites of L1 to L3, I/O (on both back ends), the API and the
# seed 000 Table 5 query and the trace under
# ThreadSanitizer (TSAN_TESTS; test_syscalls forbids the system calls its
# runtime makes, test_scale and test_alloc_fail outgrow it).
test: deps test-native test-asan test-tsan test-aarch64
	@echo "karui: all suites passed"

test-native: build
	@echo "== karui tests: x86-64 =="
	@cd $(BUILD) && $(CTEST)

test-asan: deps
	@echo "== karui tests: AddressSanitizer + UBSan =="
	@$(CMAKE) -S . -B $(ASAN) -DKARUI_SANITIZE=address -DKARUI_BENCH=OFF >/dev/null
	@cmake --build $(ASAN)
	@cd $(ASAN) && ASAN_OPTIONS=detect_leaks=1 $(CTEST)

CORE_TESTS := test_life test_runtime test_park test_sched test_key test_stack test_timer test_blocking
SYNC_TESTS := test_sem test_monitor test_barrier test_chan test_stream test_entry test_wait
IO_TESTS   := test_io_pipes test_io_cancel test_io_sockets test_io_idle test_io_fork
TSAN_TESTS := test_ctx test_vp $(CORE_TESTS) test_onevp $(SYNC_TESTS) $(IO_TESTS) test_api test_dbquery \
              test_trace
empty :=
space := $(empty) $(empty)

test-tsan: deps
	@echo "== karui tests: ThreadSanitizer =="
	@$(CMAKE) -S . -B $(TSAN) -DKARUI_SANITIZE=thread -DKARUI_BENCH=OFF >/dev/null
	@cmake --build $(TSAN) --target $(TSAN_TESTS)
	@cd $(TSAN) && TSAN_OPTIONS=halt_on_error=1 $(CTEST) \
		-R '^($(subst $(space),|,$(TSAN_TESTS)))(_epoll|_no_uring)?$$'

test-aarch64: deps
	@echo "== karui tests: aarch64 under qemu-user =="
	@$(CMAKE) -S . -B $(ARM) -DCMAKE_TOOLCHAIN_FILE=cmake/aarch64-linux-gnu.cmake \
		-DKARUI_BENCH=OFF >/dev/null
	@cmake --build $(ARM)
	@cd $(ARM) && $(CTEST)

# Every experiment in short mode (demo) or in full (bench), a progress line
# per system on stderr, then the report: report/REPORT.md and its plots, from
# report/results.jsonl, which starts with the machine the run took place on.
RUN_REPORT := scripts/report --run report/results.jsonl -- $(BUILD)/bin/karui-bench run all --json

demo: build
	@scripts/deps.sh --demo
	@$(RUN_REPORT) --quick

bench: build
	@scripts/deps.sh --demo
	@$(RUN_REPORT)

clean:
	rm -rf $(BUILD) $(LIB) $(ASAN) $(TSAN) $(ARM)
