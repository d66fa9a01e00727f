# karui — `make test` runs the whole suite, `make demo` the experiments.
# Both install the Debian packages they need first (scripts/deps.sh).

BUILD   := build
ASAN    := build-asan
ARM     := build-aarch64
CMAKE   := cmake -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo
CTEST   := ctest --output-on-failure --timeout 900
export PATH := $(PATH):/usr/local/go/bin

.PHONY: all deps build test test-native test-asan test-aarch64 demo bench clean

all: build

deps:
	@scripts/deps.sh

build: deps
	@$(CMAKE) -S . -B $(BUILD) >/dev/null
	@cmake --build $(BUILD)

# The suite three times: native, AddressSanitizer + UBSan, and aarch64 under
# qemu-user.  Each ends with ctest's "N tests failed out of M" line.
test: deps test-native test-asan test-aarch64
	@echo "karui: all suites passed"

test-native: build
	@echo "== karui tests: x86-64 =="
	@cd $(BUILD) && $(CTEST)

test-asan: deps
	@echo "== karui tests: AddressSanitizer + UBSan =="
	@$(CMAKE) -S . -B $(ASAN) -DKARUI_SANITIZE=address -DKARUI_BENCH=OFF >/dev/null
	@cmake --build $(ASAN)
	@cd $(ASAN) && ASAN_OPTIONS=detect_leaks=1 $(CTEST)

test-aarch64: deps
	@echo "== karui tests: aarch64 under qemu-user =="
	@$(CMAKE) -S . -B $(ARM) -DCMAKE_TOOLCHAIN_FILE=cmake/aarch64-linux-gnu.cmake \
		-DKARUI_BENCH=OFF >/dev/null
	@cmake --build $(ARM)
	@cd $(ARM) && $(CTEST)

# The experiments in short mode and the table of karui against its peers.
demo: build
	@$(BUILD)/bin/karui-bench run all --quick

bench: build
	@$(BUILD)/bin/karui-bench run all

clean:
	rm -rf $(BUILD) $(ASAN) $(ARM)
