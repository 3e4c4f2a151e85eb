#!/usr/bin/env bash
# The `eutaxy check` benchmark: time to verdict and schedules per second.
# Builds nothing: it runs $EUTAXY_BIN (default build/eutaxy) from the repo root.
#
#   bench/check.sh            # leases, leases-fixed, wide-small, wide-small -j 2; 3 runs each
#   bench/check.sh -n 5       # 5 runs each (the table shows the median)
#   bench/check.sh --wide     # the full wide scenario (5,356 schedules reduced) instead of wide-small
#   bench/check.sh --reset    # also wide-small with resets (3,688 schedules): what the fault costs
#   bench/check.sh --only leases-fixed
#   bench/check.sh --always   # also leases-fixed and wide-small with a sim.always added
#   bench/check.sh --por      # instead: the partial-order workloads, each with and without reduction
#   bench/check.sh --restore  # instead: each workload restored (the default) and with --no-restore
#
# Exit 1 when a workload's verdict is not the expected one. See bench/README.md.
set -euo pipefail
# $EUTAXY_BIN is taken relative to where the script was started; the default, from the repo root.
if [ -n "${EUTAXY_BIN:-}" ] && [ "${EUTAXY_BIN#/}" = "$EUTAXY_BIN" ]; then EUTAXY_BIN="$PWD/$EUTAXY_BIN"; fi
cd "$(dirname "$0")/.."

runs=3
wide=small
reset=0
jobs=2
only=""
always=no
por=no
restore=no
usage() {
  sed -n '2,14p' "$0" | sed 's/^# \{0,1\}//'
  echo "options: -n RUNS (default 3), --wide, --reset, -j JOBS for the parallel workload (default 2), --only NAME, --always, --por, --restore"
}
while [ $# -gt 0 ]; do
  case "$1" in
    -n) runs="$2"; shift 2 ;;
    --wide) wide=full; shift ;;
    --reset) reset=1; shift ;;
    -j) jobs="$2"; shift 2 ;;
    --only) only="$2"; shift 2 ;;
    --always) always=yes; shift ;;
    --por) por=yes; shift ;;
    --restore) restore=yes; shift ;;
    -h|--help) usage; exit 0 ;;
    *) echo "bench/check.sh: unknown option $1" >&2; usage >&2; exit 2 ;;
  esac
done

bin="${EUTAXY_BIN:-build/eutaxy}"
if [ ! -x "$bin" ]; then
  echo "bench/check.sh: no eutaxy binary at $bin (build it, or set EUTAXY_BIN)" >&2
  exit 2
fi

tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
record="$tmp/runs.tsv"
: > "$record"

# name|expected-verdict|expected-schedules|jobs|scenario|extra arguments (optional)
workloads=(
  "leases|VIOLATED|15|1|scenarios/lease-pool/leases.sim.lua"
  "leases-fixed|BOUNDED|17|1|scenarios/lease-pool/leases.fixed.sim.lua"
)
if [ "$wide" = full ]; then
  workloads+=("wide|BOUNDED|5356|1|bench/check/wide/wide.sim.lua"
              "wide-j$jobs|BOUNDED|0|$jobs|bench/check/wide/wide.sim.lua")
else
  workloads+=("wide-small|BOUNDED|800|1|bench/check/wide/wide-small.sim.lua"
              "wide-small-j$jobs|BOUNDED|0|$jobs|bench/check/wide/wide-small.sim.lua")
fi
if [ "$reset" = 1 ]; then
  workloads+=("wide-small-reset|BOUNDED|3688|1|bench/check/wide/wide-small-reset.sim.lua")
fi
# The cost of sim.always: the same spaces, with the uniqueness also looked at after every turn that wrote.
if [ "$always" = yes ]; then
  workloads+=("leases-fixed-always|BOUNDED|18|1|bench/check/lease-always/leases-fixed-always.sim.lua"
              "wide-small-always|BOUNDED|2780|1|bench/check/wide/wide-small-always.sim.lua")
fi

# Partial-order reduction: the orders of turns that commute (bench/check/por)
# and the fanout outbox (bench/check/outbox), each reduced and in full. The
# full searches that do not end in reasonable time run under a budget.
if [ "$por" = yes ]; then
  workloads=("por-disjoint|BOUNDED|1|1|bench/check/por/disjoint.sim.lua"
             "por-disjoint-full|INCONCLUSIVE|0|1|bench/check/por/disjoint.sim.lua|--no-reduction --budget-ms 60000"
             "por-shared|BOUNDED|168|1|bench/check/por/shared.sim.lua"
             "por-shared-full|BOUNDED|33120|1|bench/check/por/shared.sim.lua|--no-reduction"
             "por-lock|BOUNDED|16|1|bench/check/por/lock.sim.lua"
             "por-lock-full|BOUNDED|2696|1|bench/check/por/lock.sim.lua|--no-reduction"
             "outbox|BOUNDED|11834|1|bench/check/outbox/outbox.sim.lua|--budget-ms 600000"
             "outbox-full|INCONCLUSIVE|0|1|bench/check/outbox/outbox.sim.lua|--no-reduction --budget-ms 120000")
fi

# Restoring the world instead of rebuilding it (bench/README.md): each
# workload as check runs it and with --no-restore, side by side. wide-full is
# the wide scenario without reduction (303,274 schedules), the rate the
# checker's own cost shows most plainly in; depth-N are runs of N requests in
# a row, for the memory the checkpoints take against the depth of a run.
if [ "$restore" = yes ]; then
  workloads=()
  for w in "leases|VIOLATED|15|1|scenarios/lease-pool/leases.sim.lua|" \
           "leases-fixed|BOUNDED|17|1|scenarios/lease-pool/leases.fixed.sim.lua|" \
           "wide|BOUNDED|5356|1|bench/check/wide/wide.sim.lua|" \
           "wide-full|BOUNDED|303274|1|bench/check/wide/wide.sim.lua|--no-reduction" \
           "wide-small-reset|BOUNDED|3688|1|bench/check/wide/wide-small-reset.sim.lua|" \
           "depth-16|BOUNDED|17|1|bench/check/depth/depth-16.sim.lua|" \
           "depth-64|BOUNDED|65|1|bench/check/depth/depth-64.sim.lua|"; do
    IFS='|' read -r name expect schedules njobs scenario extra <<< "$w"
    workloads+=("$name|$expect|$schedules|$njobs|$scenario|$extra"
                "$name-rebuilt|$expect|$schedules|$njobs|$scenario|$extra --no-restore")
  done
fi

# Peak RSS of each run, where GNU time is installed (Debian's `time`).
timer=""
if [ -x /usr/bin/time ]; then timer=/usr/bin/time; fi

echo "eutaxy: $bin ($("$bin" version 2>/dev/null || echo '?')), $runs run(s) per workload, $(nproc) cpu(s)"
for w in "${workloads[@]}"; do
  extra=""
  IFS='|' read -r name expect schedules njobs scenario extra <<< "$w"
  if [ -n "$only" ] && [ "$only" != "$name" ]; then continue; fi
  args=(check "$scenario" --json)
  if [ -n "$extra" ]; then read -r -a more <<< "$extra"; args+=("${more[@]}"); fi
  if [ "$njobs" -gt 1 ]; then args+=(-j "$njobs"); fi
  # the peak RSS from one run more, under /usr/bin/time: timed runs start
  # eutaxy itself, so that their wall is the process's, not time's exec too
  rss=0
  if [ -n "$timer" ]; then
    "$timer" -f %M -o "$tmp/$name.rss" "$bin" "${args[@]}" > /dev/null 2>&1 || true
    rss=$(tail -1 "$tmp/$name.rss" 2>/dev/null | grep -E '^[0-9]+$' || echo 0)
  fi
  for i in $(seq 1 "$runs"); do
    out="$tmp/$name.$i.json"
    rc=0
    t0=${EPOCHREALTIME/[.,]/}
    "$bin" "${args[@]}" > "$out" 2> "$tmp/$name.$i.err" || rc=$?
    t1=${EPOCHREALTIME/[.,]/}
    t0=$((10#$t0 * 1000)) t1=$((10#$t1 * 1000))
    printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$name" "$expect" "$schedules" "$njobs" "$rc" "$((t1 - t0))" "$out" "$rss" >> "$record"
    printf '  %-16s run %d: exit %d, %d ms\n' "$name" "$i" "$rc" "$(((t1 - t0) / 1000000))" >&2
    if [ "$rc" -ge 2 ] && [ "$rc" -ne 3 ]; then
      echo "bench/check.sh: $name failed (exit $rc):" >&2
      head -20 "$tmp/$name.$i.err" >&2
    fi
  done
done
echo
"$bin" run bench/check/report.lua "$record"
