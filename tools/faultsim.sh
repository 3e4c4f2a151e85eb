#!/usr/bin/env bash
# tools/faultsim.sh: the host's fault simulation sweep (host/faultsim.h).
#
# Runs one whole command again and again with EUTAXY_FAULTSIM failing the
# Nth allocation or I/O call, for N = 1, 2, ... up to the number of calls
# the command makes without faults, and checks every run:
#
#   check  eutaxy check SCENARIO: the exit is 0..3, never a signal, no
#          sanitizer report, the faultsim line is printed (the process ended
#          normally), and a verdict other than the fault-free one names the
#          fault (out of memory, an I/O error).
#   serve  eutaxy serve spec/fixtures/faultsim (a ledger writing each transfer
#          as two rows in one turn, then a receipt in a new object, whose
#          database is in memory until its file is written whole) on a copy
#          of a state that already holds the committed transfer t0 (and its
#          receipt): start it with the fault, POST
#          /transfer/t1 with curl, SIGTERM it; then start it again without
#          faults and read the rows. The faulted server exits 0 (or fails at
#          start-up naming the fault), with no sanitizer report; t0 is still
#          there; t1 has both rows or neither; a 2xx answer means t1 is there;
#          an answer other than 200 names the fault in the server's log.
#
# usage: tools/faultsim.sh [-b BIN] [-r RANGE] [-s SHARD] [-k KEEP] check SCENARIO MODE...
#        tools/faultsim.sh [-b BIN] [-r RANGE] [-s SHARD] [-k KEEP] serve MODE...
#   MODE   alloc, alloc+, io or io+ (see faultsim.h: N fails only the Nth, N+ all from the Nth)
#   RANGE  all (default), or F/K: N = 1..F, then every K-th N to the end
#   SHARD  I/M: only the Ns of RANGE with N mod M = I - 1, so M processes share a sweep
#   BIN    the eutaxy binary (default build/eutaxy); an ASan build finds leaks
#   KEEP   a folder where the output of each failing run is kept
#
# The count of a command is the same from run to run only with address space
# randomization off (Lua hashes tables by address, and rehashes allocate), so
# every run goes through `setarch -R` where the system allows it, and every
# N is written with ten digits, so the environment keeps one size.
# Exit: 0 every run passed, 1 some failed (each is listed), 2 usage.
set -uo pipefail
cd "$(dirname "$0")/.."

bin=build/eutaxy
range=all
keep=
shard=1/1
while getopts "b:r:s:k:" o; do
  case $o in
    b) bin=$OPTARG ;;
    r) range=$OPTARG ;;
    s) shard=$OPTARG ;;
    k) keep=$OPTARG ;;
    *) exit 2 ;;
  esac
done
shift $((OPTIND - 1))
what=${1:-}
[ $# -gt 0 ] && shift
case $what in
  check) scenario=${1:?"usage: tools/faultsim.sh check SCENARIO MODE..."}; shift ;;
  serve) config=spec/fixtures/faultsim/wrangler.jsonc ;;
  *) echo "usage: tools/faultsim.sh [-b BIN] [-r RANGE] [-k KEEP] check SCENARIO MODE... | serve MODE..." >&2; exit 2 ;;
esac
[ $# -gt 0 ] || { echo "tools/faultsim.sh: which modes? alloc, alloc+, io, io+" >&2; exit 2; }
[ -x "$bin" ] || { echo "tools/faultsim.sh: no eutaxy binary at $bin (-b BIN)" >&2; exit 2; }
case $range in
  all) first=0; every=1 ;;
  */*) first=${range%/*}; every=${range#*/} ;;
  *) echo "tools/faultsim.sh: RANGE is all or F/K, got $range" >&2; exit 2 ;;
esac
shard_i=${shard%/*}
shard_m=${shard#*/}
if ! [[ $first =~ ^[0-9]+$ && $every =~ ^[1-9][0-9]*$ && $shard_i =~ ^[1-9][0-9]*$ &&
        $shard_m =~ ^[1-9][0-9]*$ ]] || [ "$shard_i" -gt "$shard_m" ]; then
  echo "tools/faultsim.sh: RANGE is all or F/K and SHARD I/M with 1 <= I <= M" >&2
  exit 2
fi

export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1}:handle_abort=1
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
norand=()
setarch -R true 2>/dev/null && norand=(setarch -R)

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
[ -n "$keep" ] && mkdir -p "$keep"

failures=0
runs=0
declare -A outcomes  # how the runs of one sweep ended, for its summary line
tally() { outcomes[$1]=$((${outcomes[$1]:-0} + 1)); }
summary() {
  local k out=
  for k in "${!outcomes[@]}"; do out+="${out:+, }$k: ${outcomes[$k]}"; done
  echo "  outcomes: $out"
  outcomes=()
}
fail() {  # fail LABEL WHY: one failing run, its output kept
  failures=$((failures + 1))
  echo "FAIL $1: $2"
  if [ -n "$keep" ]; then
    cat "$work"/out "$work"/err "$work"/log 2>/dev/null > "$keep/$(echo "$1" | tr ' :/+' '____').txt"
  fi
}

bad_text='AddressSanitizer|LeakSanitizer|runtime error:|PANIC|Assertion'
# lua-cjson (a Debian package) leaks its buffers when its luaopen_cjson
# runs out of memory half-way; it is unloaded by then, so LeakSanitizer
# names no module. Such a report, and nothing else, is tallied, not failed.
cjson_leak_only() {
  grep -q 'ERROR: LeakSanitizer' "$1" &&
    ! grep -E "$bad_text" "$1" | grep -qvE 'ERROR: LeakSanitizer|SUMMARY: AddressSanitizer: [0-9]+ byte' &&
    ! grep -A2 -E '^(Direct|Indirect) leak of' "$1" | grep -E '^ +#1 ' | grep -qv '(<unknown module>)'
}

names_fault() {  # names_fault KIND FILE...: the output says what failed
  case $1 in
    alloc) grep -qiE 'memory|NOMEM' "${@:2}" ;;
    io) grep -qiE 'I/O|IOERR|unable to open|CANTOPEN|disk' "${@:2}" ;;
  esac
}
counted() {  # counted KIND FILE: the count the faultsim line reports
  sed -n "s/^eutaxy faultsim: .*: \([0-9]*\) allocations, \([0-9]*\) io calls.*/\1 \2/p" "$2" |
    { read -r a i; [ "$1" = alloc ] && echo "${a:-0}" || echo "${i:-0}"; }
}

# The value of EUTAXY_FAULTSIM for N, always as long (see the top).
spec() { printf '%s:%010d%s' "$1" "$2" "$3"; }

# Every N of the sweep: 1..first, then every `every`-th to total.
sweep_ns() {
  local total=$1 n
  for ((n = 1; n <= total; n++)); do
    [ $(((n - 1) % shard_m)) -eq $((shard_i - 1)) ] || continue
    if [ "$n" -le "$first" ] || [ $(((n - first) % every)) -eq 0 ] ||
       [ "$n" -eq "$total" ]; then echo "$n"; fi
  done
}

# ---- check ---------------------------------------------------------------

check_run() {  # check_run SPEC: exit code of one check with EUTAXY_FAULTSIM=SPEC
  EUTAXY_FAULTSIM=$1 timeout -k 5 300 "${norand[@]}" "$bin" check "$scenario" --quiet \
    > "$work"/out 2> "$work"/err
}

sweep_check() {
  local mode=$1 kind=${1%+} plus= base total n rc
  [ "$mode" != "$kind" ] && plus=+
  check_run "$kind:9999999999$plus"
  base=$?
  total=$(counted "$kind" "$work"/err)
  if [ "$base" -gt 3 ] || [ "$total" -eq 0 ]; then
    fail "check $mode baseline" "exit $base, $total calls counted"
    return
  fi
  local count=0 t0=$SECONDS
  for n in $(sweep_ns "$total"); do
    count=$((count + 1))
    check_run "$(spec "$kind" "$n" "$plus")"
    rc=$?
    if [ "$rc" -gt 3 ]; then
      fail "check $kind:$n$plus" "exit $rc ($( [ $rc -gt 128 ] && echo "signal $((rc - 128))" || echo "timeout or crash"))"
    elif cjson_leak_only "$work"/err; then
      tally "lua-cjson's open leaked"
      continue
    elif grep -qE "$bad_text" "$work"/err; then
      fail "check $kind:$n$plus" "exit $rc with a sanitizer report or panic"
    elif ! grep -q '^eutaxy faultsim: ' "$work"/err; then
      fail "check $kind:$n$plus" "exit $rc without the faultsim line"
    elif [ "$rc" -ne "$base" ] && ! names_fault "$kind" "$work"/out "$work"/err; then
      fail "check $kind:$n$plus" "exit $rc (without faults $base) and no word of the fault"
    fi
    tally "exit $rc"
  done
  runs=$((runs + count))
  echo "check $scenario $kind:N$plus: N in 1..$total ($range), $count runs, $((SECONDS - t0)) s"
  summary
}

# ---- serve ---------------------------------------------------------------

server_pid=
server_port=
start_server() {  # start_server STATE SPEC: 0 once it listens (server_pid, server_port set)
  rm -f "$work"/fifo
  mkfifo "$work"/fifo
  EUTAXY_FAULTSIM=$2 "${norand[@]}" "$bin" serve "$config" --port 0 --state "$1" \
    --quiet > "$work"/fifo 2> "$work"/log &
  server_pid=$!
  # A server that hangs is killed after 120 s (and then fails the run), but
  # not through timeout(1): it answers a SIGTERM with an exit code of its own.
  { timeout 120 tail --pid="$server_pid" -f /dev/null || kill -KILL "$server_pid"; } > /dev/null 2>&1 &
  exec 3< "$work"/fifo
  local line=
  read -r -t 60 -u 3 line
  server_port=$(echo "$line" | sed -n 's|^eutaxy serve: listening on http://127\.0\.0\.1:\([0-9]*\)$|\1|p')
  [ -n "$server_port" ]
}

stop_server() {  # stop_server: the exit code of the server, after SIGTERM
  local rc
  kill -TERM "$server_pid" 2>/dev/null
  wait "$server_pid"
  rc=$?
  exec 3<&-
  return $rc
}

post() {  # post PATH: the HTTP status (000 when no answer)
  curl -s -o /dev/null -w '%{http_code}' --max-time 30 -X POST "http://127.0.0.1:$server_port$1"
}

entries() {  # entries STATE: the rows, read by a server without faults, into $work/rows
  start_server "$1" "" || return 1
  curl -s --max-time 30 -o "$work"/rows "http://127.0.0.1:$server_port/entries"
  local rc=$?
  stop_server || return 1
  return $rc
}

serve_run() {  # serve_run SPEC: one faulted request; sets status, rc
  rm -rf "$work"/state
  cp -r "$work"/template "$work"/state
  status=none
  if start_server "$work"/state "$1"; then
    status=$(post /transfer/t1)
    stop_server
    rc=$?
  else
    wait "$server_pid"
    rc=$?
    exec 3<&-
  fi
}

sweep_serve() {
  local mode=$1 kind=${1%+} plus= total n label
  [ "$mode" != "$kind" ] && plus=+
  serve_run "$kind:9999999999$plus"
  total=$(counted "$kind" "$work"/log)
  if [ "$rc" -ne 0 ] || [ "$status" != 200 ] || [ "$total" -eq 0 ]; then
    fail "serve $mode baseline" "exit $rc, answer $status, $total calls counted"
    return
  fi
  local count=0 t0=$SECONDS
  for n in $(sweep_ns "$total"); do
    count=$((count + 1))
    label="serve $kind:$n$plus"
    serve_run "$(spec "$kind" "$n" "$plus")"
    cp "$work"/log "$work"/faulted.log
    # A server that stops by itself (state it cannot make durable: its log
    # says so as it decides) may be in its exit when the SIGTERM comes, which
    # then ends it with 143.
    stopped=
    grep -qE '^eutaxy serve: (stopped: |cannot commit |cannot begin a transaction |.*answering 500 and stopping)' \
      "$work"/faulted.log && stopped=1
    if cjson_leak_only "$work"/faulted.log; then
      tally "lua-cjson's open leaked"
      continue
    elif grep -qE "$bad_text" "$work"/faulted.log; then
      fail "$label" "a sanitizer report or panic (exit $rc, answer $status)"
      continue
    elif [ "$rc" -gt 3 ] && ! [ -n "$stopped" -a "$rc" = 143 ]; then
      fail "$label" "the faulted server exited $rc (answer $status)"
      continue
    elif [ -z "$stopped" ] && ! grep -q '^eutaxy faultsim: ' "$work"/faulted.log; then
      fail "$label" "exit $rc without the faultsim line"
      continue
    elif { [ "$rc" -ne 0 ] || [ "$status" != 200 ]; } && ! names_fault "$kind" "$work"/faulted.log; then
      fail "$label" "exit $rc, answer $status, and the log names no fault"
      continue
    fi
    if [ "$status" = none ]; then tally "did not start (exit $rc)"
    elif [ -n "$stopped" ]; then tally "answered $status, stopped by itself"
    else tally "answered $status, exit $rc"; fi
    if ! entries "$work"/state; then
      fail "$label" "the state does not serve again without faults (answer $status)"
      continue
    fi
    if ! grep -qx 't0 credit 10' "$work"/rows || ! grep -qx 't0 debit -10' "$work"/rows; then
      fail "$label" "the committed transfer t0 is lost"
    elif [ "$(grep -c '^t1 ' "$work"/rows)" = 1 ]; then
      fail "$label" "transfer t1 is half-written: $(grep '^t1 ' "$work"/rows)"
    elif [[ $status == 2* ]] && [ "$(grep -c '^t1 ' "$work"/rows)" != 2 ]; then
      fail "$label" "answered $status but transfer t1 is not stored"
    fi
  done
  runs=$((runs + count))
  echo "serve $kind:N$plus: N in 1..$total ($range), $count runs, $((SECONDS - t0)) s"
  summary
}

if [ "$what" = serve ]; then
  command -v curl > /dev/null || { echo "tools/faultsim.sh: serve needs curl" >&2; exit 2; }
  mkdir "$work"/template
  if ! start_server "$work"/template "" || [ "$(post /transfer/t0)" != 200 ] || ! stop_server; then
    echo "tools/faultsim.sh: cannot make the starting state: $(cat "$work"/log)" >&2
    exit 1
  fi
fi

for mode in "$@"; do
  case $mode in
    alloc|alloc+|io|io+) "sweep_$what" "$mode" ;;
    *) echo "tools/faultsim.sh: unknown mode $mode (alloc, alloc+, io, io+)" >&2; exit 2 ;;
  esac
done
echo "$runs runs, $failures failed"
[ "$failures" -eq 0 ]
