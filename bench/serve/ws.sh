#!/usr/bin/env bash
# bench/serve/ws.sh: WebSockets with the Hibernation API, `eutaxy serve`
# against workerd, side by side (bench/serve/README.md, "WebSockets"). Builds
# ws_client.c with cc; EUTAXY is the eutaxy binary (a Release build),
# WORKERD the workerd binary.
#
# Two workloads, each run on a fresh server with a fresh state directory, the
# two servers alternating run by run:
#   broadcast  CLIENTS sockets in one room; one of them sends, each message
#              goes to all of them: fan-out latency, delivered messages/s
#   idle       sockets join rooms and go quiet; once the rooms have
#              hibernated, the server's memory per socket
# Exits 1 if a client missed a message or a run failed (after the table).
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
: "${EUTAXY:?set EUTAXY to the eutaxy binary, e.g. EUTAXY=build-rel/eutaxy}"
: "${WORKERD:?set WORKERD to the workerd binary, e.g. WORKERD=/tmp/workerd/node_modules/.bin/workerd}"
CLIENTS=${CLIENTS:-1000}          # sockets of the broadcast room, the sender's included
PROCS=${PROCS:-2}                 # client processes reading them
SIZE=${SIZE:-100}                 # bytes of each message
WARMUP_MSGS=${WARMUP_MSGS:-20}    # messages sent one at a time first, not measured
PACED=${PACED:-200}               # then one at a time: fan-out latency
BLAST=${BLAST:-500}               # then WINDOW at a time: delivered messages per second
WINDOW=${WINDOW:-16}
IDLE=${IDLE:-"1x1000 100x10 1x10000 1000x10"}  # rooms x sockets per room
IDLE_ORDER=${IDLE_ORDER:-by-room}              # or round-robin: one socket per room in turn
HIBERNATE_WAIT=${HIBERNATE_WAIT:-15}           # seconds quiet before the memory is read
ROUNDS=${ROUNDS:-1}
SERVERS=${SERVERS:-"eutaxy workerd"}
WORKLOADS=${WORKLOADS:-"broadcast idle"}

for tool in cc curl; do
  command -v "$tool" > /dev/null || { echo "ws.sh: $tool is not installed (see bench/serve/README.md)" >&2; exit 2; }
done
for bin in "$EUTAXY" "$WORKERD"; do
  [ -x "$bin" ] || { echo "ws.sh: $bin is not an executable" >&2; exit 2; }
done
EUTAXY=$(cd "$(dirname "$EUTAXY")" && pwd)/$(basename "$EUTAXY")
WORKERD=$(cd "$(dirname "$WORKERD")" && pwd)/$(basename "$WORKERD")

# Each socket is a descriptor on both ends: raise the soft limit as far as it goes.
ulimit -n "$(ulimit -Hn)" 2> /dev/null || true
fd_limit=$(ulimit -n)

work=$(mktemp -d "${TMPDIR:-/tmp}/bench-ws.XXXXXX")
cc -O2 -Wall -o "$work/ws_client" "$here/ws_client.c"
client=$work/ws_client
started=()
cleanup() {
  local pid
  for pid in "${started[@]}"; do kill -KILL "$pid" 2> /dev/null || true; done
  if [ -n "${KEEP:-}" ]; then echo "ws.sh: kept $work" >&2; else rm -rf "$work"; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

EUTAXY_CONFIG=$here/eutaxy/ws_wrangler.jsonc
WORKERD_CONFIG=$here/workerd/ws_config.capnp
# shellcheck source=servers.sh
. "$here/servers.sh"

# The server and its descendants, one pid a line.
tree() {
  local p todo=("$pid")
  while [ ${#todo[@]} -gt 0 ]; do
    p=${todo[0]}
    todo=("${todo[@]:1}")
    echo "$p"
    todo+=($(ps -o pid= --ppid "$p" 2> /dev/null || true))
  done
}

# The process that does the work: of the tree, the one with the most resident memory.
server_process() {
  local best=$pid best_rss=0 p rss
  for p in $(tree); do
    rss=$(awk '/^VmRSS:/ { print $2 }' "/proc/$p/status" 2> /dev/null || echo 0)
    if [ "${rss:-0}" -gt "$best_rss" ]; then best=$p; best_rss=$rss; fi
  done
  echo "$best"
}

# kb FIELD: VmRSS or VmHWM summed over the server's process tree, in kB.
kb() {
  local p sum=0 v
  for p in $(tree); do
    v=$(awk -v f="$1:" '$1 == f { print $2 }' "/proc/$p/status" 2> /dev/null || true)
    sum=$((sum + ${v:-0}))
  done
  echo "$sum"
}

mb() { awk -v k="$1" 'BEGIN { printf "%.1f MB", k / 1024 }'; }
ms() { awk -v us="$1" 'BEGIN { printf "%.1f ms", us / 1000 }'; }
load1() { cut -d' ' -f1 /proc/loadavg; }

log_lines() {
  if [ "$1" = eutaxy ]; then wc -l < "$2/err"; else grep -vc '^$' "$2/err" || true; fi
}

# field KEY FILE: the value of KEY=VALUE in ws_client's line.
field() { tr ' ' '\n' < "$2" | sed -n "s/^$1=//p"; }

failed=0
broadcast_rows=()
idle_rows=()

# broadcast SERVER RUN
broadcast() {
  local server=$1 dir="$work/$1-broadcast-$2" out rc=0 logs peak
  start "$server" "$dir"
  out=$dir/client.txt
  "$client" broadcast "$port" "$CLIENTS" "$PROCS" "$SIZE" "$WARMUP_MSGS" "$PACED" "$BLAST" "$WINDOW" \
    "$(server_process)" > "$out" 2> "$dir/client.err" || rc=$?
  peak=$(mb "$(kb VmHWM)")
  stop
  logs=$(log_lines "$server" "$dir")
  if [ "$rc" != 0 ]; then
    failed=1
    broadcast_rows+=("| $server | FAILED: $(tail -1 "$dir/client.err") | | | | | | | | | | | $peak | $logs |")
    return 0
  fi
  broadcast_rows+=("| $server | $(ms "$(field paced_p50_us "$out")") | $(ms "$(field paced_p99_us "$out")") | $(field delivered_per_s "$out") | $(field blast_s "$out") s | $(ms "$(field blast_p50_us "$out")") | $(ms "$(field blast_p99_us "$out")") | $(field server_cpu_pct "$out") % | $(field server_us_per_delivery "$out") µs | $(field client_cpu_pct "$out") % | $(field client_us_per_delivery "$out") µs | $(field other_cpu_pct "$out") % | $peak | $logs |")
  [ "$logs" = 0 ] || { echo "== $server broadcast: first lines of its stderr"; head -5 "$dir/err"; } >&2
}

# idle SERVER ROOMSxPER_ROOM RUN
idle() {
  local server=$1 rooms=${2%x*} per=${2#*x} dir="$work/$1-idle-$2-$3" n i before awake asleep line logs connect_time
  n=$((rooms * per))
  if [ $((n + 200)) -gt "$fd_limit" ]; then
    idle_rows+=("| $server | $rooms | $n | skipped: ulimit -n is $fd_limit | | | | | | | |")
    return 0
  fi
  # eutaxy evicts (hibernates) an object idle for --evict-after seconds;
  # workerd hibernates one after 10 s without events, on its own.
  if [ "$server" = eutaxy ]; then
    start "$server" "$dir" --evict-after 1 --max-connections $((n + 100))
  else
    start "$server" "$dir"
  fi
  # The worker itself loaded (it answers 426 without an upgrade), no room yet.
  curl -s -o /dev/null "http://127.0.0.1:$port/room/none"
  sleep 1
  before=$(kb VmRSS)
  mkfifo "$dir/ctl"
  "$client" hold "$port" "$rooms" "$per" "$IDLE_ORDER" < "$dir/ctl" > "$dir/client.txt" 2> "$dir/client.err" &
  local cpid=$!
  started+=("$cpid")
  exec 7> "$dir/ctl"
  for i in $(seq 3000); do
    grep -q '^connected' "$dir/client.txt" && break
    kill -0 "$cpid" 2> /dev/null || break
    sleep 0.1
  done
  if ! grep -q '^connected' "$dir/client.txt"; then
    exec 7>&-
    failed=1
    idle_rows+=("| $server | $rooms | $n | FAILED: $(tail -1 "$dir/client.err") | | | | | | $(log_lines "$server" "$dir") | $(load1) |")
    kill "$cpid" 2> /dev/null || true
    stop
    return 0
  fi
  sleep 1
  awake=$(kb VmRSS)
  sleep "$HIBERNATE_WAIT"
  asleep=$(kb VmRSS)
  echo check >&7
  for i in $(seq 1200); do
    grep -q '^hibernated' "$dir/client.txt" && break
    kill -0 "$cpid" 2> /dev/null || break
    sleep 0.1
  done
  line=$(sed -n 's/^hibernated \([0-9]* of [0-9]*\)$/\1/p' "$dir/client.txt")
  echo quit >&7
  exec 7>&-
  wait "$cpid" 2> /dev/null || true
  stop
  logs=$(log_lines "$server" "$dir")
  if [ -z "$line" ]; then
    failed=1
    line="FAILED: $(tail -1 "$dir/client.err")"
  fi
  connect_time=$(sed -n 's/^connected [0-9]* in \(.*\)$/\1/p' "$dir/client.txt")
  idle_rows+=("| $server | $rooms | $n | $connect_time | $(mb "$before") | $(mb "$awake") | $(mb "$asleep") | $(( (asleep - before) * 1024 / n )) | $line | $logs | $(load1) |")
  [ "$logs" = 0 ] || { echo "== $server idle $2: first lines of its stderr"; head -5 "$dir/err"; } >&2
}

load_start=$(cut -d' ' -f1-3 /proc/loadavg)
for round in $(seq "$ROUNDS"); do
  for workload in $WORKLOADS; do
    if [ "$workload" = broadcast ]; then
      for server in $SERVERS; do
        echo "ws.sh: round $round, broadcast on $server" >&2
        broadcast "$server" "$round"
      done
    else
      for config in $IDLE; do
        for server in $SERVERS; do
          echo "ws.sh: round $round, idle $config on $server" >&2
          idle "$server" "$config" "$round"
        done
      done
    fi
  done
done

echo "eutaxy serve against workerd, WebSockets with the Hibernation API, fresh state per run"
echo "$("$EUTAXY" version) ($EUTAXY), $("$WORKERD" --version) ($WORKERD)"
echo "$(nproc) CPUs, load average at the start: $load_start, at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
if [ ${#broadcast_rows[@]} -gt 0 ]; then
  echo
  echo "broadcast: $CLIENTS sockets in one room, $PROCS client processes, $SIZE-byte messages;" \
    "$PACED sent one at a time (after $WARMUP_MSGS not measured), then $BLAST with at most $WINDOW in flight"
  echo
  echo "| server | paced p50 | paced p99 | delivered/s | blast time | blast p50 | blast p99 | server CPU | server CPU per delivery | client CPU | client CPU per delivery | other CPU | peak RSS | stderr lines |"
  echo "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"
  printf '%s\n' "${broadcast_rows[@]}"
fi
if [ ${#idle_rows[@]} -gt 0 ]; then
  echo
  echo "idle: RSS of the server's processes before the sockets, once they are open ($IDLE_ORDER), and after $HIBERNATE_WAIT s quiet"
  echo
  echo "| server | rooms | sockets | connecting took | RSS before | RSS open | RSS hibernated | bytes per socket | rooms hibernated | stderr lines | load |"
  echo "|---|---|---|---|---|---|---|---|---|---|---|"
  printf '%s\n' "${idle_rows[@]}"
fi
exit "$failed"
