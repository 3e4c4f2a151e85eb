#!/usr/bin/env bash
# bench/serve/run.sh: `eutaxy serve` against workerd, side by side, on the
# same workloads (bench/serve/README.md). Builds nothing: EUTAXY is the eutaxy
# binary (a Release build), WORKERD the workerd binary, and EUTAXY_BASE, for
# the server "base" in SERVERS, another eutaxy binary to compare with.
#
# Every workload gets a fresh server with a fresh state directory, so the
# peak RSS (VmHWM) is that workload's alone; the two servers alternate, one
# workload at a time, so a burst of load from elsewhere on the machine hits
# both rather than one. Whatever it starts is killed on exit.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
: "${EUTAXY:?set EUTAXY to the eutaxy binary, e.g. EUTAXY=build/eutaxy}"
DURATION=${DURATION:-10}          # seconds of each measured wrk run
WARMUP=${WARMUP:-2}               # seconds of wrk before it, not measured
TOUCH=${TOUCH:-10000}             # objects of the touch test
TOUCH_LIMIT=${TOUCH_LIMIT:-600}   # seconds the touch test may take in all, and each making of the random workloads' objects
OBJECTS=${OBJECTS:-10000}         # objects of the random workloads
SERVERS=${SERVERS:-"eutaxy workerd"}  # of eutaxy, workerd and base
WORKLOADS=${WORKLOADS:-"counter-one counter-spread lease touch random-10000 random-1000"}
THREADS=2
CONNECTIONS=32

for tool in wrk curl; do
  command -v "$tool" > /dev/null || { echo "run.sh: $tool is not installed (see bench/serve/README.md)" >&2; exit 2; }
done
bins=("$EUTAXY")
for server in $SERVERS; do
  case $server in
    eutaxy) ;;
    workerd) : "${WORKERD:?set WORKERD to the workerd binary, e.g. WORKERD=/tmp/workerd/node_modules/.bin/workerd}"; bins+=("$WORKERD") ;;
    base) : "${EUTAXY_BASE:?set EUTAXY_BASE to the eutaxy binary to compare with}"; bins+=("$EUTAXY_BASE") ;;
    *) echo "run.sh: no server $server in SERVERS (eutaxy, workerd, base)" >&2; exit 2 ;;
  esac
done
for bin in "${bins[@]}"; do
  [ -x "$bin" ] || { echo "run.sh: $bin is not an executable" >&2; exit 2; }
done
absolute() { echo "$(cd "$(dirname "$1")" && pwd)/$(basename "$1")"; }
EUTAXY=$(absolute "$EUTAXY")
[ -z "${WORKERD:-}" ] || WORKERD=$(absolute "$WORKERD")
[ -z "${EUTAXY_BASE:-}" ] || EUTAXY_BASE=$(absolute "$EUTAXY_BASE")

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

# The descriptors the server has open, counted in /proc, and the
# connections waiting in its listen backlog (the kernel completed them, the
# server has not accepted them: the listening socket's Recv-Q). fd_watch_start
# samples both every 0.2 s in the background from the server's start, a line
# "MS FDS BACKLOG" each in $dir/samples; fd_watch_stop DIR FROM TO ends it
# and sets fds_peak (the most of all samples and the end), fds_now (at the
# end) and waiting: the fewest connections in the backlog at any sample from
# a second after FROM to TO (ms since 1970, the measured run), that is those
# the server left waiting all run long, which wrk counts as no error (a
# backlog that fills and drains as connections open is no concern). The
# server's process is sought anew each time: a sample of a busy server can
# take longer than 0.2 s.
declare -A fd_limit  # server -> its "Max open files", as the server sees it
# fd_count PID: its open descriptors, nothing if it is gone.
fd_count() {
  [ -d "/proc/$1/fd" ] || return 0
  # shellcheck disable=SC2012  # the names are numbers
  ls -U "/proc/$1/fd" 2> /dev/null | wc -l
}
now_ms() { echo $(( $(date +%s%N) / 1000000 )); }
# fd_watch_start DIR, once the server is started.
fd_watch_start() {
  local dir=$1 p
  p=$(server_process)
  fd_limit[$server]=$(awk '/^Max open files/ { print $4 }' "/proc/$p/limits" 2> /dev/null || echo '?')
  : > "$dir/samples"
  (
    set +e
    while :; do
      n=$(fd_count "$(server_process)")
      q=$(ss -ltnH "sport = :$port" 2> /dev/null | awk '{ q += $2 } END { print q + 0 }')
      echo "$(now_ms) ${n:-0} ${q:-0}" >> "$dir/samples"
      sleep 0.2
    done
  ) &
  watcher=$!
  started+=("$watcher")
}
fd_watch_stop() {
  local dir=$1 from=$2 to=$3
  kill -TERM "$watcher" 2> /dev/null || true
  wait "$watcher" 2> /dev/null || true
  fds_now=$(fd_count "$(server_process)")
  fds_now=${fds_now:-(exited)}
  fds_peak=$(awk -v n="${fds_now//[^0-9]/}" 'BEGIN { m = n + 0 } NF == 3 && $2 > m { m = $2 } END { print m }' "$dir/samples")
  waiting=$(awk -v a=$((from + 1000)) -v b="$to" 'NF == 3 && $1 >= a && $1 <= b && (w == "" || $3 < w) { w = $3 } END { print (w == "" ? "?" : w) }' "$dir/samples")
}

# make_objects DIR URL: one request to each object of curl's URL range, 32 at
# a time, within TOUCH_LIMIT; writes "STATUS SECONDS" a request to DIR/codes
# (000: no answer within curl's 60 s or no connection) and sets took (ms).
make_objects() {
  local dir=$1 url=$2 t0 t1
  t0=$(date +%s%N)
  timeout "$TOUCH_LIMIT" curl -s --parallel --parallel-max "$CONNECTIONS" --max-time 60 \
    -o /dev/null -w '%{http_code} %{time_total}\n' "$url" > "$dir/codes" 2> /dev/null || true
  t1=$(date +%s%N)
  took=$(( (t1 - t0) / 1000000 ))
}

# answers DIR: "N (STATUS x COUNT, ...)" of the answers in DIR/codes that
# were not 2xx, no answer (000) included.
answers() {
  awk '$1 !~ /^2/ { n++; c[$1]++ }
    END {
      printf "%d", n
      if (n) { printf " ("; for (k in c) { printf "%s%s x %d", sep, k, c[k]; sep = ", " }; printf ")" }
    }' "$1/codes"
}

rows=()
touch_rows=()
made_lines=()

# wrk_workload SERVER WORKLOAD: warm-up, then the measured run.
wrk_workload() {
  local server=$1 workload=$2 dir="$work/$1-$2" path=/ script=() options=() out
  case $workload in
    counter-one) path=/counter/one ;;
    counter-spread) script=(-s "$here/spread.lua") ;;
    lease) path=/lease/acquire; script=(-s "$here/lease.lua") ;;
    random-*)
      script=(-s "$here/random.lua")
      # workerd has no such option: it keeps every object it opened.
      [ "$server" = workerd ] || options=(--max-resident "${workload#random-}") ;;
  esac
  start "$server" "$dir" "${options[@]}"
  fd_watch_start "$dir"
  local url="http://127.0.0.1:$port$path"
  # Making an object costs far more than a write in one: the spread and
  # random workloads measure writes, so each of their objects is made before
  # the warm-up.
  if [ "$workload" = counter-spread ]; then
    make_objects "$dir" "http://127.0.0.1:$port/counter/[0-999]"
  fi
  if [ "${workload%%-*}" = random ]; then
    make_objects "$dir" "http://127.0.0.1:$port/counter/[0-$((OBJECTS - 1))]"
    made_lines+=("- $workload $server: $(grep -c '^2' "$dir/codes" || true) of $OBJECTS objects made before the warm-up, $(answers "$dir") failed, $(( OBJECTS - $(wc -l < "$dir/codes") )) cut off by the ${TOUCH_LIMIT} s limit, $took ms")
    script+=(-- "$OBJECTS")
  fi
  # wrk stops at its -d; timeout is for a wrk that would not.
  timeout $((WARMUP + 60)) wrk -t"$THREADS" -c"$CONNECTIONS" -d"${WARMUP}s" "$url" "${script[@]}" > "$dir/warmup.txt" || true
  local from to
  from=$(now_ms)
  timeout $((DURATION + 60)) wrk -t"$THREADS" -c"$CONNECTIONS" -d"${DURATION}s" --latency "$url" "${script[@]}" > "$dir/wrk.txt" || true
  to=$(now_ms)
  out=$dir/wrk.txt
  local rps p50 p99 non2xx sockerr peak logs
  rps=$(awk '/^Requests\/sec:/ { print $2 }' "$out")
  p50=$(awk '$1 == "50%" { print $2 }' "$out")
  p99=$(awk '$1 == "99%" { print $2 }' "$out")
  non2xx=$(awk '/Non-2xx or 3xx responses:/ { print $NF }' "$out")
  sockerr=$(awk '/Socket errors:/ { gsub(",", ""); print "connect " $4 ", read " $6 ", write " $8 ", timeout " $10 }' "$out")
  peak=$(mem VmHWM)
  fd_watch_stop "$dir" "$from" "$to"
  stop
  logs=$(log_lines "$server" "$dir")
  rows+=("| $workload | $server | ${rps:-?} | ${p50:-?} | ${p99:-?} | $peak | $fds_peak | $fds_now | $waiting | ${non2xx:-0} | ${sockerr:-none} | $logs |")
  [ "$logs" = 0 ] || { echo "== $server $workload: first lines of its stderr"; head -5 "$dir/err"; } >&2
}

# touch SERVER: TOUCH fresh objects, one request each, 32 at a time. The
# latency of a request is curl's time_total for it, from its start to the
# last byte of the answer, over the requests answered (2xx or not).
touch_test() {
  local server=$1 dir="$work/$1-touch" ok sent
  start "$server" "$dir"
  fd_watch_start "$dir"
  local from to
  from=$(now_ms)
  make_objects "$dir" "http://127.0.0.1:$port/touch/[1-$TOUCH]"
  to=$(now_ms)
  local rss peak logs lat
  rss=$(mem VmRSS)
  peak=$(mem VmHWM)
  fd_watch_stop "$dir" "$from" "$to"
  stop
  ok=$(grep -c '^2' "$dir/codes" || true)
  sent=$(wc -l < "$dir/codes")
  lat=$(awk '$1 != "000" { print $2 * 1000 }' "$dir/codes" | sort -n | awk '
    { v[NR] = $1 }
    END {
      if (NR == 0) { print "? | ?"; exit }
      i50 = int(NR * 0.50 + 0.999999); i99 = int(NR * 0.99 + 0.999999)
      printf "%.2fms | %.2fms", v[i50], v[i99]
    }')
  logs=$(log_lines "$server" "$dir")
  touch_rows+=("| $server | $TOUCH | $ok | $(answers "$dir") | $((TOUCH - sent)) | $took | $(awk -v n="$ok" -v ms="$took" 'BEGIN { printf "%.1f", (ms > 0 ? n * 1000 / ms : 0) }') | $lat | $rss | $peak | $fds_peak | $fds_now | $waiting | $logs |")
  [ "$logs" = 0 ] || { echo "== $server touch: first lines of its stderr"; head -5 "$dir/err"; } >&2
}

for workload in $WORKLOADS; do
  for server in $SERVERS; do
    echo "run.sh: $workload on $server" >&2
    if [ "$workload" = touch ]; then touch_test "$server"; else wrk_workload "$server" "$workload"; fi
  done
done

echo "side by side: $SERVERS; wrk -t$THREADS -c$CONNECTIONS -d${DURATION}s --latency after ${WARMUP}s of warm-up, fresh state per run"
versions="$("$EUTAXY" version) ($EUTAXY)"
case " $SERVERS " in *" workerd "*) versions+=", $("$WORKERD" --version) ($WORKERD)" ;; esac
case " $SERVERS " in *" base "*) versions+=", base: $("$EUTAXY_BASE" version) ($EUTAXY_BASE)" ;; esac
echo "$versions, $(wrk -v 2>&1 | head -1 | cut -d' ' -f1-2)"
echo "$(nproc) CPUs, load average at the end:$(cut -d' ' -f1-3 /proc/loadavg | sed 's/^/ /')"
for server in $SERVERS; do
  [ -z "${fd_limit[$server]:-}" ] || echo "$server's descriptor limit (Max open files): ${fd_limit[$server]}"
done
if [ ${#rows[@]} -gt 0 ]; then
  echo
  echo "| workload | server | req/s | p50 | p99 | peak RSS | peak fds | final fds | waiting conns | non-2xx | socket errors | stderr lines |"
  echo "|---|---|---|---|---|---|---|---|---|---|---|---|"
  printf '%s\n' "${rows[@]}"
fi
if [ ${#made_lines[@]} -gt 0 ]; then echo; printf '%s\n' "${made_lines[@]}"; fi
if [ ${#touch_rows[@]} -gt 0 ]; then
  echo
  echo "| touch | objects | 2xx | failed | cut off | ms | new objects/s | p50 | p99 | RSS after | peak RSS | peak fds | final fds | waiting conns | stderr lines |"
  echo "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"
  printf '%s\n' "${touch_rows[@]}"
fi
