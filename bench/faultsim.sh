#!/usr/bin/env bash
# The whole fault simulation sweep of the host: every N, not the part ctest
# runs (see tools/faultsim.sh and host/faultsim.h). Long: a check sweep is
# one run per allocation of the command (about 66,000 for the lease pool)
# and mode, a few hours on one core under ASan. Builds nothing: it runs
# $EUTAXY_BIN (default build/eutaxy), which should be a sanitizer build
# (-DEUTAXY_SANITIZE=ON -DCMAKE_BUILD_TYPE=Debug) so that leaks show.
#
#   bench/faultsim.sh                    # check alloc+ alloc, serve io+ io alloc+ alloc, every N
#   bench/faultsim.sh -j 2               # two processes, each taking every other N
#   bench/faultsim.sh -r 1/10            # every 10th N only
#   bench/faultsim.sh --only serve -k /tmp/faultsim-failures
#
# Exit 1 when any run failed; each failure is listed (and kept with -k DIR).
set -uo pipefail
if [ -n "${EUTAXY_BIN:-}" ] && [ "${EUTAXY_BIN#/}" = "$EUTAXY_BIN" ]; then EUTAXY_BIN="$PWD/$EUTAXY_BIN"; fi
cd "$(dirname "$0")/.."
bin=${EUTAXY_BIN:-build/eutaxy}
jobs=1
range=all
only=
keep=()
while [ $# -gt 0 ]; do
  case "$1" in
    -j) jobs="$2"; shift 2 ;;
    -r) range="$2"; shift 2 ;;
    -k) keep=(-k "$2"); shift 2 ;;
    --only) only="$2"; shift 2 ;;
    -h|--help) sed -n '2,15p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "bench/faultsim.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
  esac
done

sweeps=()
[ "$only" != serve ] && sweeps+=("check scenarios/lease-pool/leases.fixed.sim.lua alloc+ alloc")
[ "$only" != check ] && sweeps+=("serve io+ io alloc+ alloc")

status=0
start=$SECONDS
for sweep in "${sweeps[@]}"; do
  pids=()
  for ((i = 1; i <= jobs; i++)); do
    # shellcheck disable=SC2086  # the sweep's words are its arguments
    tools/faultsim.sh -b "$bin" -r "$range" -s "$i/$jobs" "${keep[@]}" $sweep > "/tmp/faultsim.$$.$i" 2>&1 &
    pids+=($!)
  done
  for ((i = 1; i <= jobs; i++)); do
    wait "${pids[$((i - 1))]}" || status=1
    sed "s|^|[$i/$jobs] |" "/tmp/faultsim.$$.$i"
    rm -f "/tmp/faultsim.$$.$i"
  done
done
echo "bench/faultsim.sh: $((SECONDS - start)) s, $([ $status -eq 0 ] && echo "every run passed" || echo "some runs FAILED")"
exit $status
