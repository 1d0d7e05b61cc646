#!/bin/sh
# The test command: installs what is missing, builds (Release, warnings on) and
# runs every test through CTest; the Vulkan tests run on Mesa's lavapipe (a CPU
# Vulkan driver, FISH_GPU=cpu) when no GPU is present. Then a clang build with
# ASan + UBSan and libFuzzer (-DFISH_FUZZ=ON, build-fuzz/) runs the GGUF
# corruption corpus and the fuzz regression files under the sanitizers (the
# regressions on every SIMD kernel family the CPU runs), and
# short fuzz campaigns of the GGUF loader (FISH_FUZZ_SECONDS, default 120; 0
# skips them all), of the chat templates (FISH_FUZZ_JINJA_SECONDS, default 60)
# and of fish serve's request bodies (FISH_FUZZ_REQUEST_SECONDS, default 60),
# whose corpora are kept in /var/cache/fish-ci/fuzz{,-jinja,-request} between
# runs (tests/fuzz/README.md).
# --configure-only: the dependency step and the configure, nothing more (the
# fresh-root check in .ci/ runs that much).
set -e
cd "$(dirname "$0")/.."
cmake/install-deps.sh --tests
jobs=$(nproc 2>/dev/null || echo 2)
# ccache (installed with --tests) keeps both builds' objects between
# runs: in /var/cache/fish-ci/ccache on the CI machine, else ccache's default.
launcher=""
if command -v ccache >/dev/null; then
  launcher="-DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache"
  mkdir -p /var/cache/fish-ci/ccache 2>/dev/null && export CCACHE_DIR="${CCACHE_DIR:-/var/cache/fish-ci/ccache}"
  export CCACHE_BASEDIR="$(pwd)"
fi
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DFISH_BUILD_TESTS=ON $launcher >/dev/null
[ "${1:-}" = "--configure-only" ] && { echo "configured build/ with the tests"; exit 0; }
cmake --build build -j "$jobs"
# Mesa keeps lavapipe's compiled pipelines there between runs too (most of a
# cold Vulkan test's time is pipeline compiles).
if [ -z "${MESA_SHADER_CACHE_DIR:-}" ] && mkdir -p /var/cache/fish-ci/mesa 2>/dev/null; then
  export MESA_SHADER_CACHE_DIR=/var/cache/fish-ci/mesa
fi
echo "== ctest"
(export FISH_GPU="${FISH_GPU:-cpu}"; cd build && ctest --output-on-failure -j "$jobs")
echo "== the slowest tests (s)"  # CTest's own record: name, runs, seconds
grep -v '^---' build/Testing/Temporary/CTestCostData.txt | awk '{t=$NF; $NF=""; printf "%8.1f %s\n", t, $0}' | sort -rn | head -12 || true
t0=$(date +%s)
cmake -S . -B build-fuzz -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_C_COMPILER=clang-14 -DCMAKE_CXX_COMPILER=clang++-14 \
  -DFISH_FUZZ=ON -DFISH_VULKAN=OFF -DFISH_BUILD_TESTS=ON $launcher >/dev/null
cmake --build build-fuzz -j "$jobs" --target fuzz_gguf fuzz_jinja fuzz_request make_fuzz_seeds test_gguf_corrupt test_fuzz_regressions
echo "== GGUF corruption corpus and fuzz regressions under ASan + UBSan (clang)"
build-fuzz/bin/test_gguf_corrupt
build-fuzz/bin/test_fuzz_regressions
# Again on the narrower SIMD kernel families this CPU also runs (the default is the widest):
# each has its own activation quantisers and strip kernels.
for fam in avx2:avx2 avxvnni:avx_vnni; do
  if grep -qw "${fam#*:}" /proc/cpuinfo; then
    echo "== fuzz regressions, FISH_CPU_KERNELS=${fam%%:*}"
    FISH_CPU_KERNELS="${fam%%:*}" build-fuzz/bin/test_fuzz_regressions
  fi
done
secs=${FISH_FUZZ_SECONDS:-120}
if [ "$secs" -gt 0 ]; then
  FISH_FUZZ_JOBS="$jobs" tests/fuzz/run-campaign.sh build-fuzz "$secs"
  FISH_FUZZ_JOBS="$jobs" tests/fuzz/run-campaign.sh build-fuzz "${FISH_FUZZ_JINJA_SECONDS:-60}" jinja
  FISH_FUZZ_JOBS="$jobs" tests/fuzz/run-campaign.sh build-fuzz "${FISH_FUZZ_REQUEST_SECONDS:-60}" request
fi
echo "== sanitizer build, corpus and fuzzing: $(( $(date +%s) - t0 )) s"
