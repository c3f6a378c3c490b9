#!/usr/bin/env bash
# Installs what is missing, builds, and runs Tern's whole test suite: the Release build's tests
# (unit, integration, end-to-end), then the unit tests again under ASan+UBSan and the
# comm/ps/trainer tests under ThreadSanitizer.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
jobs=$(nproc)

cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j"$jobs"
(cd build && ctest --output-on-failure -j"$jobs" --timeout 900)

if [ "${TERN_SKIP_SANITIZERS:-0}" != 1 ]; then
  # Unit tests under ASan+UBSan; the threaded modules' tests (comm/, ps/, data/'s prefetcher)
  # under ThreadSanitizer. Only the test binaries are built in these trees.
  cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTERN_SANITIZE=ON -DTERN_CUDA=OFF >/dev/null
  cmake --build build-asan -j"$jobs" --target unit_tests
  (cd build-asan && ASAN_OPTIONS=detect_leaks=1 ctest --output-on-failure -j"$jobs" -L unit)
  cmake -S . -B build-tsan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTERN_TSAN=ON -DTERN_CUDA=OFF >/dev/null
  cmake --build build-tsan -j"$jobs" --target tsan_tests
  (cd build-tsan && TSAN_OPTIONS="halt_on_error=1 suppressions=$PWD/../tests/tsan.supp" \
     ctest --output-on-failure -j"$jobs" -L threaded)
fi
