#!/usr/bin/env bash
# Builds the parsers' libFuzzer harnesses (tests/fuzz) with clang, ASan and UBSan in build-fuzz/,
# and runs each for SECONDS (default 20) from its checked-in seeds. A crash, sanitizer report,
# hang (10 s for one input) or memory blow-up (2 GB) stops with the input's path: fix the bug, and
# copy the input into tests/fuzz/regressions/NAME/, which the normal suite replays
# (fuzz_replay_NAME).
#   scripts/fuzz.sh [SECONDS] [NAME ...]     # NAME: model_file npz config corpus nbest score request http
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-20}
shift || true
names=("$@")
[ ${#names[@]} -gt 0 ] || names=(model_file npz config corpus nbest score request http)
jobs=$(nproc)

cmake -S . -B build-fuzz -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTERN_FUZZ=ON -DTERN_CUDA=OFF \
  -DCMAKE_C_COMPILER=clang-14 -DCMAKE_CXX_COMPILER=clang++-14 >/dev/null
cmake --build build-fuzz -j"$jobs" --target fuzzers

for name in "${names[@]}"; do
  work=build-fuzz/runs/$name
  rm -rf "$work" && mkdir -p "$work/corpus" "$work/crashes"
  cp -r tests/fuzz/seeds/"$name"/. "$work/corpus/"
  [ -d tests/fuzz/regressions/"$name" ] && cp -r tests/fuzz/regressions/"$name"/. "$work/corpus/"
  echo "== fuzz_$name for ${seconds}s"
  set +e
  ASAN_OPTIONS=detect_leaks=1:allocator_may_return_null=1 UBSAN_OPTIONS=print_stacktrace=1 \
    build-fuzz/bin/fuzz_"$name" "$work/corpus" -max_total_time="$seconds" -timeout=10 \
    -rss_limit_mb=2048 -print_final_stats=1 -artifact_prefix="$work/crashes/" \
    > "$work/log" 2>&1
  rc=$?
  set -e
  grep -E "^(stat::number_of_executed_units|stat::peak_rss_mb)|^#[0-9]+.*DONE" "$work/log" || true
  if [ $rc -ne 0 ] || [ -n "$(ls -A "$work/crashes")" ]; then
    tail -n 40 "$work/log"
    echo "fuzz.sh: fuzz_$name failed; the input is in $work/crashes/ (log: $work/log)" >&2
    exit 1
  fi
done
echo "fuzz.sh: ${names[*]} ran ${seconds}s each without a finding"
