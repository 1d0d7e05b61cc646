#!/bin/sh
# The test command: installs what is missing, builds (Release, warnings on) and
# runs every test through CTest; the Vulkan tests run on Mesa's lavapipe (a CPU
# Vulkan driver, FISH_GPU=cpu) when no GPU is present. The GGUF corruption
# corpus is also built and run under AddressSanitizer + UBSan.
# --configure-only: the dependency step and the configure, nothing more (the
# fresh-root check in .ci/ runs that much).
set -e
cd "$(dirname "$0")/.."
cmake/install-deps.sh --tests
jobs=$(nproc 2>/dev/null || echo 2)
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DFISH_BUILD_TESTS=ON >/dev/null
[ "${1:-}" = "--configure-only" ] && { echo "configured build/ with the tests"; exit 0; }
cmake --build build -j "$jobs"
cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=Debug -DFISH_SANITIZE=ON -DFISH_VULKAN=OFF -DFISH_BUILD_TESTS=ON >/dev/null
cmake --build build-asan -j "$jobs" --target test_gguf_corrupt
echo "== GGUF corruption corpus under ASan + UBSan"
build-asan/bin/test_gguf_corrupt
echo "== ctest"
export FISH_GPU="${FISH_GPU:-cpu}"
cd build && ctest --output-on-failure -j "$jobs"
