# bench/serve/servers.sh: starting and stopping the two servers, sourced by
# run.sh and ws.sh. The sourcing script sets EUTAXY, WORKERD, EUTAXY_CONFIG,
# WORKERD_CONFIG and an array started (the pids its cleanup kills), and
# EUTAXY_BASE when it runs the server "base": another eutaxy binary (an
# earlier commit's) with the same config, to compare two builds.

# start SERVER DIR [EUTAXY OPTIONS...]: starts it in DIR (state/, out, err)
# and sets pid and port.
start() {
  local server=$1 dir=$2 i
  shift 2
  mkdir -p "$dir/state"
  : > "$dir/out"  # before the server's shell opens it: the loop below reads it at once
  port=
  if [ "$server" != workerd ]; then
    local bin=$EUTAXY
    [ "$server" = eutaxy ] || bin=$EUTAXY_BASE
    "$bin" serve "$EUTAXY_CONFIG" --port 0 --state "$dir/state" --quiet "$@" \
      > "$dir/out" 2> "$dir/err" &
  else
    # --control-fd reports the port workerd bound, as one JSON line.
    "$WORKERD" serve "$WORKERD_CONFIG" -s http=127.0.0.1:0 -d do-storage="$dir/state" \
      --control-fd=3 3> "$dir/out" 2> "$dir/err" > /dev/null &
  fi
  pid=$!
  started+=("$pid")
  for i in $(seq 100); do
    if [ "$server" != workerd ]; then
      port=$(sed -n 's|^eutaxy serve: listening on http://127\.0\.0\.1:\([0-9]*\)$|\1|p' "$dir/out")
    else
      port=$(sed -n 's|.*"socket":"http","port":\([0-9]*\).*|\1|p' "$dir/out")
    fi
    [ -n "$port" ] && return 0
    kill -0 "$pid" 2> /dev/null || break
    sleep 0.1
  done
  echo "$(basename "$0"): $server did not start; its stderr:" >&2
  cat "$dir/err" >&2
  exit 1
}

# stop: SIGTERM, 10 s to finish, then SIGKILL.
stop() {
  local i
  kill -TERM "$pid" 2> /dev/null || true
  for i in $(seq 100); do
    kill -0 "$pid" 2> /dev/null || break
    sleep 0.1
  done
  kill -KILL "$pid" 2> /dev/null || true
  wait "$pid" 2> /dev/null || true
}
