#!/usr/bin/env bash
# Runs every fuzz target of fuzz/ for a while, one after the other.
#
#   bench/fuzz.sh [SECONDS_PER_TARGET] [TARGET...]     (default: 600, all six)
#
# Runs the targets of $EUTAXY_FUZZ_BUILD (default build-fuzz), built with
#   CC=clang cmake -S . -B build-fuzz -DEUTAXY_FUZZ=ON && cmake --build build-fuzz -j2 --target fuzz
# Each target starts from its seeds and regressions in fuzz/ and grows a
# work corpus outside the repository ($EUTAXY_FUZZ_WORK, default
# /tmp/eutaxy-fuzz), kept from one run to the next. Crashes go to
# $EUTAXY_FUZZ_WORK/crashes/NAME/; once one is fixed, copy it to
# fuzz/regressions/NAME/ so that ctest keeps running it. One target runs at
# a time, on one core. Exits 1 when any target crashed.
set -uo pipefail
cd "$(dirname "$0")/.."

seconds=${1:-600}
shift || true
targets=("$@")
[ ${#targets[@]} -eq 0 ] && targets=(clone sql http jsonc scenario replay)
work=${EUTAXY_FUZZ_WORK:-/tmp/eutaxy-fuzz}
build=${EUTAXY_FUZZ_BUILD:-build-fuzz}


found=0
for name in "${targets[@]}"; do
  bin="$build/fuzz/fuzz_$name"
  if [ ! -x "$bin" ]; then
    echo "no $bin: build it with CC=clang cmake -S . -B $build -DEUTAXY_FUZZ=ON && cmake --build $build -j2 --target fuzz" >&2
    exit 2
  fi
  mkdir -p "$work/corpus/$name" "$work/crashes/$name"
  dirs=("$work/corpus/$name" "fuzz/corpus/$name")
  [ -d "fuzz/regressions/$name" ] && dirs+=("fuzz/regressions/$name")
  dict=()
  [ -f "fuzz/$name.dict" ] && dict=(-dict="fuzz/$name.dict")
  echo "== $name: ${seconds}s"
  "$bin" -max_total_time="$seconds" -timeout=30 -rss_limit_mb=2560 -print_final_stats=1 \
    "${dict[@]}" -artifact_prefix="$work/crashes/$name/" "${dirs[@]}" 2> "$work/$name.log"
  code=$?
  grep -E "^stat::number_of_executed_units|^#[0-9]+ +DONE" "$work/$name.log" | sed 's/^/   /'
  if [ $code -ne 0 ]; then
    found=1
    echo "   failed (exit $code): see $work/$name.log"
  fi
done

crashes=$(find "$work/crashes" -type f 2>/dev/null)
if [ -n "$crashes" ]; then
  echo "== inputs that crashed a target (replay one with: $build/fuzz/fuzz_NAME FILE):"
  echo "$crashes" | sed 's/^/   /'
  found=1
else
  echo "== no crashes"
fi
exit $found
