#!/usr/bin/env bash
# tools/parallel_shards.sh: one check split into N shards run by GNU parallel
# on this machine, then merged (eutaxy check --merge), as README's "Splitting
# a check over machines" does over hosts with parallel -S.
#
# Checks that the merge answers EXPECT (BOUNDED or VIOLATED) with its exit
# code, and against the same check run whole:
#   BOUNDED   the merged schedules, schedules by fault count and coverage are
#             the whole check's (the shards' parts are disjoint and cover it);
#             with -a, where no fault is in play and each shard reduces its
#             subtrees alone, the shards explored at least the whole check's
#             schedules and tried the same kinds at the same fault points;
#   VIOLATED  the whole check is VIOLATED too, and the merged report's
#             schedule replays without --shard as VIOLATED.
#
# usage: tools/parallel_shards.sh [-b BIN] [-n N] [-x ARGS] [-a] SCENARIO EXPECT
#   BIN   the eutaxy binary (default build/eutaxy; the valgrind wrapper works)
#   N     how many shards (default 3)
#   ARGS  more options for every check, whole and shards (--no-reduction)
# Exit: 0 all held, 1 something did not (said on stderr), 2 usage.
set -uo pipefail
cd "$(dirname "$0")/.."

bin=build/eutaxy
n=3
extra=
exact=yes
usage() {
  echo "usage: tools/parallel_shards.sh [-b BIN] [-n N] [-x ARGS] [-a] SCENARIO BOUNDED|VIOLATED" >&2
  exit 2
}
while getopts "b:n:x:a" opt; do
  case $opt in
    a) exact=no ;;
    b) bin=$OPTARG ;;
    n) n=$OPTARG ;;
    x) extra=$OPTARG ;;
    *) usage ;;
  esac
done
shift $((OPTIND - 1))
[ $# -eq 2 ] || usage
scenario=$1
expect=$2
case $expect in
  BOUNDED) expect_code=0 ;;
  VIOLATED) expect_code=1 ;;
  *) usage ;;
esac
[[ $n =~ ^[1-9][0-9]*$ ]] || usage
command -v parallel >/dev/null || { echo "parallel_shards: GNU parallel is not installed (.ci/packages)" >&2; exit 1; }

dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
# A budget no run reaches (a slow machine or valgrind changes no verdict), and ARGS.
opts="--budget-ms 600000 $extra"

fail() {
  echo "parallel_shards: $scenario: $*" >&2
  exit 1
}

# The command README gives for hosts (parallel -S host1,host2), on this one:
# --results keeps each shard's stdout, its --json report, in shard-K.out.
# Each shard's exit is its own verdict's (1 for VIOLATED), which parallel
# counts as a failed job: what counts is that every report is written.
shards=()
for k in $(seq 1 "$n"); do shards+=("$k"); done
parallel --will-cite --jobs "$n" --results "$dir/shard-{}.out" \
  "$bin" check "$scenario" --shard {}/"$n" --json $opts ::: "${shards[@]}"
for k in "${shards[@]}"; do
  [ -s "$dir/shard-$k.out" ] || fail "shard $k/$n wrote no report"
done

"$bin" check --merge "$dir"/shard-*.out --json > "$dir/merged.json"
code=$?
[ "$code" -eq "$expect_code" ] || fail "the merge exited $code, expected $expect_code"
"$bin" check "$scenario" --json $opts > "$dir/whole.json"

# The comparisons read JSON, so they run in eutaxy's own Lua.
"$bin" run /dev/stdin "$dir/merged.json" "$dir/whole.json" "$expect" "$exact" <<'LUA'
local json = require "eutaxy.json"
local function load(path)
  local f = assert(io.open(path))
  local doc = json.decode(f:read("a"))
  f:close()
  return doc
end
local merged, whole, expect, exact = load(arg[1]), load(arg[2]), arg[3], arg[4] == "yes"
local function check(ok, fmt, ...)
  if not ok then
    io.stderr:write("parallel_shards: ", string.format(fmt, ...), "\n")
    os.exit(1)
  end
end
check(merged.verdict == expect, "the merge says %s, expected %s", tostring(merged.verdict), expect)
check(whole.verdict == expect, "the whole check says %s, expected %s", tostring(whole.verdict), expect)
check(merged.fingerprint == whole.fingerprint, "the merge's fingerprint is not the whole check's")
-- point -> the kinds tried there
local function tried(coverage)
  local t = {}
  for _, c in ipairs(coverage) do t[c.point] = table.concat(c.tried, ",") end
  return json.encode(t)
end
if expect == "BOUNDED" and exact then
  check(merged.counts.schedules == whole.counts.schedules, "the shards explored %d schedules, the whole check %d",
    merged.counts.schedules, whole.counts.schedules)
  check(json.encode(merged.counts.byFaults) == json.encode(whole.counts.byFaults),
    "schedules by fault count: merged %s, whole %s", json.encode(merged.counts.byFaults), json.encode(whole.counts.byFaults))
  check(json.encode(merged.coverage) == json.encode(whole.coverage), "the merged coverage is not the whole check's")
elseif expect == "BOUNDED" then
  check(merged.counts.schedules >= whole.counts.schedules, "the shards explored %d schedules, fewer than the whole "
    .. "check's %d", merged.counts.schedules, whole.counts.schedules)
  check(tried(merged.coverage) == tried(whole.coverage), "the shards tried other kinds at other points than the whole check")
else
  check(type(merged.schedule) == "string" and merged.replay:find(merged.schedule, 1, true) ~= nil,
    "the merged violation has no replay command")
  check(not merged.replay:find("--shard", 1, true), "the replay command names a shard: %s", merged.replay)
end
LUA
[ $? -eq 0 ] || exit 1

if [ "$expect" = VIOLATED ]; then
  schedule=$("$bin" run /dev/stdin "$dir/merged.json" <<'LUA'
local f = assert(io.open(arg[1]))
io.write(require("eutaxy.json").decode(f:read("a")).schedule)
f:close()
LUA
)
  replay=$("$bin" check "$scenario" --replay "$schedule" --quiet 2>/dev/null)
  [[ $replay == "VIOLATED  "* ]] || fail "the merged schedule $schedule does not replay as VIOLATED: $replay"
fi
echo "parallel_shards: $scenario: $n shards merged: $expect"
