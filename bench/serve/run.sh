#!/usr/bin/env bash
# bench/serve/run.sh: `eutaxy serve` against workerd, side by side, on the
# same workloads (bench/serve/README.md). Builds nothing: EUTAXY is the eutaxy
# binary (a Release build), WORKERD the workerd binary.
#
# Every workload gets a fresh server with a fresh state directory, so the
# peak RSS (VmHWM) is that workload's alone; the two servers alternate, one
# workload at a time, so a burst of load from elsewhere on the machine hits
# both rather than one. Whatever it starts is killed on exit.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
: "${EUTAXY:?set EUTAXY to the eutaxy binary, e.g. EUTAXY=build/eutaxy}"
: "${WORKERD:?set WORKERD to the workerd binary, e.g. WORKERD=/tmp/workerd/node_modules/.bin/workerd}"
DURATION=${DURATION:-10}          # seconds of each measured wrk run
WARMUP=${WARMUP:-2}               # seconds of wrk before it, not measured
TOUCH=${TOUCH:-10000}             # objects of the touch test
TOUCH_LIMIT=${TOUCH_LIMIT:-600}   # seconds the touch test may take in all
SERVERS=${SERVERS:-"eutaxy workerd"}
WORKLOADS=${WORKLOADS:-"counter-one counter-spread lease touch"}
THREADS=2
CONNECTIONS=32

for tool in wrk curl; do
  command -v "$tool" > /dev/null || { echo "run.sh: $tool is not installed (see bench/serve/README.md)" >&2; exit 2; }
done
for bin in "$EUTAXY" "$WORKERD"; do
  [ -x "$bin" ] || { echo "run.sh: $bin is not an executable" >&2; exit 2; }
done
EUTAXY=$(cd "$(dirname "$EUTAXY")" && pwd)/$(basename "$EUTAXY")
WORKERD=$(cd "$(dirname "$WORKERD")" && pwd)/$(basename "$WORKERD")

work=$(mktemp -d "${TMPDIR:-/tmp}/bench-serve.XXXXXX")
started=()
cleanup() {
  local pid
  for pid in "${started[@]}"; do kill -KILL "$pid" 2> /dev/null || true; done
  if [ -n "${KEEP:-}" ]; then echo "run.sh: kept $work" >&2; else rm -rf "$work"; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

EUTAXY_CONFIG=$here/eutaxy/wrangler.jsonc
WORKERD_CONFIG=$here/workerd/config.capnp
# shellcheck source=servers.sh
. "$here/servers.sh"

# The server's process: the started one or, if it forked (a launcher), the
# one of it and its descendants with the most resident memory.
server_process() {
  local best=$pid best_rss=0 p rss todo=("$pid")
  while [ ${#todo[@]} -gt 0 ]; do
    p=${todo[0]}
    todo=("${todo[@]:1}")
    rss=$(awk '/^VmRSS:/ { print $2 }' "/proc/$p/status" 2> /dev/null || echo 0)
    if [ "${rss:-0}" -gt "$best_rss" ]; then best=$p; best_rss=$rss; fi
    todo+=($(ps -o pid= --ppid "$p" 2> /dev/null || true))
  done
  echo "$best"
}

# mem FIELD: VmHWM (peak) or VmRSS (now) of the server, in MB.
mem() {
  local status
  status=/proc/$(server_process)/status
  [ -r "$status" ] || { echo "(exited)"; return 0; }
  awk -v f="$1:" '$1 == f { printf "%.1f MB", $2 / 1024 }' "$status"
}

# One line of the server's stderr per error it logged (--quiet leaves only those).
log_lines() {
  if [ "$1" = eutaxy ]; then wc -l < "$2/err"; else grep -vc '^$' "$2/err" || true; fi
}

rows=()
touch_lines=()

# wrk_workload SERVER WORKLOAD: warm-up, then the measured run.
wrk_workload() {
  local server=$1 workload=$2 dir="$work/$1-$2" path=/ script=() out
  case $workload in
    counter-one) path=/counter/one ;;
    counter-spread) script=(-s "$here/spread.lua") ;;
    lease) path=/lease/acquire; script=(-s "$here/lease.lua") ;;
  esac
  start "$server" "$dir"
  local url="http://127.0.0.1:$port$path"
  # Making an object costs far more than a write in one: the spread workload
  # measures writes, so each of its objects is made before the warm-up.
  if [ "$workload" = counter-spread ]; then
    curl -s --parallel --parallel-max "$CONNECTIONS" --max-time 60 -o /dev/null \
      "http://127.0.0.1:$port/counter/[0-999]" 2> /dev/null || true
  fi
  wrk -t"$THREADS" -c"$CONNECTIONS" -d"${WARMUP}s" "${script[@]}" "$url" > "$dir/warmup.txt"
  wrk -t"$THREADS" -c"$CONNECTIONS" -d"${DURATION}s" --latency "${script[@]}" "$url" > "$dir/wrk.txt"
  out=$dir/wrk.txt
  local rps p50 p99 non2xx sockerr peak logs
  rps=$(awk '/^Requests\/sec:/ { print $2 }' "$out")
  p50=$(awk '$1 == "50%" { print $2 }' "$out")
  p99=$(awk '$1 == "99%" { print $2 }' "$out")
  non2xx=$(awk '/Non-2xx or 3xx responses:/ { print $NF }' "$out")
  sockerr=$(awk '/Socket errors:/ { gsub(",", ""); print "connect " $4 ", read " $6 ", write " $8 ", timeout " $10 }' "$out")
  peak=$(mem VmHWM)
  stop
  logs=$(log_lines "$server" "$dir")
  rows+=("| $workload | $server | ${rps:-?} | ${p50:-?} | ${p99:-?} | $peak | ${non2xx:-0} | ${sockerr:-none} | $logs |")
  [ "$logs" = 0 ] || { echo "== $server $workload: first lines of its stderr"; head -5 "$dir/err"; } >&2
}

# touch SERVER: TOUCH fresh objects, one request each, 32 at a time.
touch_test() {
  local server=$1 dir="$work/$1-touch" t0 t1 ok sent codes
  start "$server" "$dir"
  t0=$(date +%s%N)
  timeout "$TOUCH_LIMIT" curl -s --parallel --parallel-max "$CONNECTIONS" --max-time 60 \
    -o /dev/null -w '%{http_code}\n' "http://127.0.0.1:$port/touch/[1-$TOUCH]" \
    > "$dir/codes" 2> /dev/null || true
  t1=$(date +%s%N)
  local rss peak logs
  rss=$(mem VmRSS)
  peak=$(mem VmHWM)
  stop
  ok=$(grep -c '^2' "$dir/codes" || true)
  sent=$(wc -l < "$dir/codes")
  codes=$(sort "$dir/codes" | uniq -c | awk '{ printf "%s%s x %s", sep, $2, $1; sep = ", " }')
  logs=$(log_lines "$server" "$dir")
  touch_lines+=("- touch $server: $ok of $TOUCH served 2xx, $((sent - ok)) failed (answers: ${codes:-none}), $((TOUCH - sent)) cut off by the ${TOUCH_LIMIT} s limit, $(( (t1 - t0) / 1000000 )) ms, RSS after $rss, peak $peak, $logs stderr lines")
  [ "$logs" = 0 ] || { echo "== $server touch: first lines of its stderr"; head -5 "$dir/err"; } >&2
}

for workload in $WORKLOADS; do
  for server in $SERVERS; do
    echo "run.sh: $workload on $server" >&2
    if [ "$workload" = touch ]; then touch_test "$server"; else wrk_workload "$server" "$workload"; fi
  done
done

echo "eutaxy serve against workerd: wrk -t$THREADS -c$CONNECTIONS -d${DURATION}s --latency after ${WARMUP}s of warm-up, fresh state per run"
echo "$("$EUTAXY" version) ($EUTAXY), $("$WORKERD" --version) ($WORKERD), $(wrk -v 2>&1 | head -1 | cut -d' ' -f1-2)"
echo "$(nproc) CPUs, load average at the end:$(cut -d' ' -f1-3 /proc/loadavg | sed 's/^/ /')"
echo
echo "| workload | server | req/s | p50 | p99 | peak RSS | non-2xx | socket errors | stderr lines |"
echo "|---|---|---|---|---|---|---|---|---|"
if [ ${#rows[@]} -gt 0 ]; then printf '%s\n' "${rows[@]}"; fi
if [ ${#touch_lines[@]} -gt 0 ]; then echo; printf '%s\n' "${touch_lines[@]}"; fi
