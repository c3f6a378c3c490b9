#!/usr/bin/env bash
# Installs what is missing, builds, and runs Tern's whole test suite: the Release build's tests
# (unit, integration, end-to-end), then the unit tests again under ASan+UBSan and the
# comm/ps/trainer tests under ThreadSanitizer, then each parser's fuzzer for 20 s.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh --tests
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
jobs=$(nproc)

cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j"$jobs"
log=$(mktemp)
(cd build && ctest --output-on-failure -j"$jobs" --timeout 900) | tee "$log"
# "N tests failed out of M" -> M - N passed (set -e has already stopped on a failure).
passed() { sed -nE 's/.*tests passed, ([0-9]+) tests failed out of ([0-9]+).*/\2 \1/p' "$1" |
             awk '{ print $1 - $2 }' | tail -n 1; }
total=$(passed "$log")

if [ "${TERN_SKIP_SANITIZERS:-0}" != 1 ]; then
  # Unit tests (and the GPU tests on the emulated GPU) under ASan+UBSan; the threaded modules' tests (comm/, ps/, data/'s prefetcher)
  # under ThreadSanitizer. Only the test binaries are built in these trees.
  cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTERN_SANITIZE=ON -DTERN_CUDA=OFF >/dev/null
  cmake --build build-asan -j"$jobs" --target unit_tests
  (cd build-asan && ASAN_OPTIONS=detect_leaks=1 ctest --output-on-failure -j"$jobs" -L 'unit|emulated_gpu') |
    tee "$log"
  total=$((total + $(passed "$log")))
  cmake -S . -B build-tsan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTERN_TSAN=ON -DTERN_CUDA=OFF >/dev/null
  cmake --build build-tsan -j"$jobs" --target tsan_tests
  # The binaries themselves (ctest would also list the tests of binaries this tree did not build),
  # on the emulated GPU: their GPU cases (ps_gpu_test's shards stepped by server threads) run too.
  for t in build-tsan/bin/*_test; do
    echo "== $t under ThreadSanitizer"
    TERN_EMULATE_GPU=1 TSAN_OPTIONS="halt_on_error=1 suppressions=$PWD/tests/tsan.supp" "$t" --gtest_brief=1 |
      tee "$log"
    total=$((total + $(sed -nE 's/.*PASSED.* ([0-9]+) tests?\..*/\1/p' "$log" | tail -n 1)))
  done
fi
if [ "${TERN_SKIP_FUZZ:-0}" != 1 ]; then
  # Each parser's libFuzzer harness for a short while (clang, ASan+UBSan, build-fuzz/): a
  # finding stops here with the input's path (scripts/fuzz.sh).
  scripts/fuzz.sh "${TERN_FUZZ_SECONDS:-20}" | tee "$log"
  total=$((total + $(grep -c '^== fuzz_' "$log")))
fi
rm -f "$log"
echo "test.sh: every build's tests passed"
echo "$total passed, 0 failed"
