#!/usr/bin/env bash
# Profiles `eutaxy check` on the wide-small workload and prints what the time
# goes to: the top symbols by self time, and the split by library (eutaxy's
# own code, liblua, libsqlite3, libc, the kernel).
# Uses `perf record --call-graph dwarf` when perf works here, else `valgrind --tool=callgrind`
# (about 50 times slower, so it explores a seeded random sample instead).
# Builds nothing: it runs $EUTAXY_BIN (default build/eutaxy) from the repo root.
#
#   bench/check-profile.sh                      # perf over the whole wide-small space
#   bench/check-profile.sh --callgrind          # callgrind over 300 random schedules
#   bench/check-profile.sh --scenario FILE      # another scenario
#   bench/check-profile.sh --random N           # N random schedules (--seed 1) instead of all
#   bench/check-profile.sh --top N              # N symbols (default 30)
#   bench/check-profile.sh --keep DIR           # keep perf.data / callgrind.out in DIR
set -euo pipefail
# $EUTAXY_BIN is taken relative to where the script was started; the default, from the repo root.
if [ -n "${EUTAXY_BIN:-}" ] && [ "${EUTAXY_BIN#/}" = "$EUTAXY_BIN" ]; then EUTAXY_BIN="$PWD/$EUTAXY_BIN"; fi
cd "$(dirname "$0")/.."

scenario=bench/check/wide/wide-small.sim.lua
tool=""
random=""
top=30
keep=""
while [ $# -gt 0 ]; do
  case "$1" in
    --callgrind) tool=callgrind; shift ;;
    --perf) tool=perf; shift ;;
    --scenario) scenario="$2"; shift 2 ;;
    --random) random="$2"; shift 2 ;;
    --top) top="$2"; shift 2 ;;
    --keep) keep="$2"; shift 2 ;;
    -h|--help) sed -n '2,15p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "bench/check-profile.sh: unknown option $1" >&2; exit 2 ;;
  esac
done

bin="${EUTAXY_BIN:-build/eutaxy}"
if [ ! -x "$bin" ]; then
  echo "bench/check-profile.sh: no eutaxy binary at $bin (build it, or set EUTAXY_BIN)" >&2
  exit 2
fi

if [ -n "$keep" ]; then
  mkdir -p "$keep"
  out="$keep"
else
  out="$(mktemp -d)"
  trap 'rm -rf "$out"' EXIT
fi

perf_works() {
  command -v perf > /dev/null 2>&1 &&
    perf record -q -o "$out/probe.data" -- true > /dev/null 2>&1
}
if [ -z "$tool" ]; then
  if perf_works; then tool=perf
  elif command -v valgrind > /dev/null 2>&1; then tool=callgrind
  else echo "bench/check-profile.sh: neither perf nor valgrind works here" >&2; exit 2
  fi
fi
if [ "$tool" = callgrind ] && [ -z "$random" ]; then random=300; fi

args=(check "$scenario" --quiet)
if [ -n "$random" ]; then args+=(--random "$random" --seed 1); fi

# functions whose inclusive share says where a run's time goes (perf only)
stack_names="eu_world_new eu_isolate_new luaL_openlibs lua_load construct searcher run_turn eu_store_step sqlite3_step eu_clone_encode eu_clone_decode eu_world_free save_object eu_world_checkpoint eu_world_rewind eu_heapprint evaluate"

# first N lines of stdin; reads all of it, so no SIGPIPE under pipefail
first() { sed -n "1,${1}p"; }

echo "profiling: $bin ${args[*]} (with $tool)"
case "$tool" in
  perf)
    rc=0
    # DWARF unwinding: neither liblua nor a Release eutaxy keeps frame pointers.
    perf record -q --call-graph dwarf,16384 -F 499 -o "$out/perf.data" -- "$bin" "${args[@]}" || rc=$?
    if [ "$rc" -ge 2 ] && [ "$rc" -ne 3 ]; then echo "eutaxy check failed (exit $rc)" >&2; exit "$rc"; fi
    report() { perf report -i "$out/perf.data" --stdio "$@" 2> /dev/null | grep -v -e '^#' -e '^$' | sed 's/[ -]*$//' || true; }
    echo
    echo "== self time by library =="
    report --no-children -g none --sort dso | first 12
    echo
    echo "== top $top symbols by self time =="
    report --no-children -g none --sort dso,symbol | first "$top"
    echo
    echo "== top 25 of eutaxy's own functions by inclusive time (children, self) =="
    report --children -g none --sort dso,symbol | awk -v exe="$(basename "$bin")" '$3 == exe' | first 25
    echo
    echo "== share of samples whose stack holds (per-run set-up and tear-down against the run itself) =="
    perf script -i "$out/perf.data" 2> /dev/null | awk -v names="$stack_names" '
      BEGIN { RS = ""; k = split(names, f, " ") }
      { n++; for (i = 1; i <= k; i++) if ($0 ~ ("[ \t]" f[i] "[+(]")) hit[i]++ }
      END { for (i = 1; i <= k; i++) printf "%6.1f%%  %s\n", 100 * hit[i] / (n ? n : 1), f[i] }'
    ;;
  callgrind)
    rc=0
    valgrind --tool=callgrind --callgrind-out-file="$out/callgrind.out" -q -- "$bin" "${args[@]}" || rc=$?
    if [ "$rc" -ge 2 ] && [ "$rc" -ne 3 ]; then echo "eutaxy check failed (exit $rc)" >&2; exit "$rc"; fi
    callgrind_annotate "$out/callgrind.out" > "$out/self.txt" 2> /dev/null
    callgrind_annotate --inclusive=yes "$out/callgrind.out" > "$out/inclusive.txt" 2> /dev/null
    rows() { grep -E '^ *[0-9,]+ +\( *[0-9.]+%\) ' "$1" | grep -v 'PROGRAM TOTALS' || true; }
    echo
    echo "== self instructions by library =="
    rows "$out/self.txt" | awk '{
        n = $1; gsub(",", "", n); lib = "?"
        if (match($0, /\[[^]]*\]$/)) { lib = substr($0, RSTART + 1, RLENGTH - 2); sub(".*/", "", lib) }
        by[lib] += n; total += n }
      END { for (l in by) printf "%6.2f%%  %s\n", 100 * by[l] / total, l }' | sort -rn | first 12
    echo
    echo "== top $top functions by self instructions =="
    rows "$out/self.txt" | first "$top"
    echo
    echo "== top 25 of eutaxy's own functions by inclusive instructions =="
    rows "$out/inclusive.txt" | grep -v "'[0-9]* \\[" | { grep -F "/$(basename "$bin")]" || true; } | first 25
    ;;
  *) echo "bench/check-profile.sh: unknown tool $tool" >&2; exit 2 ;;
esac
if [ -n "$keep" ]; then echo; echo "kept in $keep"; fi
