# Thin wrapper over CMake. `make serve` and `make test` install what they need (Debian + npm).
BUILD ?= build
JOBS ?= 2

.PHONY: all deps build test serve image asan fuzz format format-check clean bench

all: build

deps:
	@bash scripts/install-deps.sh

build:
	@cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release -DGLINT_WERROR=ON >/dev/null
	@cmake --build $(BUILD) -j$(JOBS)

test: deps
	@bash tests/run_all.sh

serve: deps build
	@bash scripts/serve.sh

# glint:<version> and glint:latest (Containerfile; podman, or docker): docs/DEPLOY.md.
image:
	@bash scripts/image.sh

asan:
	@cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=Debug -DGLINT_SANITIZE=ON -DGLINT_WERROR=ON >/dev/null
	@cmake --build build-asan -j$(JOBS)

fuzz:
	@CC=clang-14 cmake -S . -B build-fuzz -DCMAKE_BUILD_TYPE=Debug -DGLINT_FUZZ=ON >/dev/null
	@cmake --build build-fuzz -j$(JOBS) --target $(basename $(notdir $(wildcard tests/fuzz/fuzz_*.c)))

bench: build
	@bash scripts/install-deps.sh --bench
	@GLINT_BIN=$(BUILD)/glint bash bench/bench.sh

format:
	@clang-format -i $$(git ls-files '*.c' '*.h')

format-check:
	@clang-format --dry-run --Werror $$(git ls-files '*.c' '*.h')

clean:
	rm -rf $(BUILD) build-asan build-fuzz
