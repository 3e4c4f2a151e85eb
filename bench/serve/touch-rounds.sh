#!/usr/bin/env bash
# bench/serve/touch-rounds.sh: the touch workload of run.sh (TOUCH new
# objects, one request each, 32 at a time), eutaxy against another eutaxy
# build ("base"), ROUNDS times, each round on a fresh ext4 file system and
# the two servers' order alternating from one round to the next. Prints each
# round's new objects per second and their ratio, then the median, mean and
# range of the ratios.
#
# Why rounds: on this kind of machine the rate of both servers moves by a
# third between windows of a few minutes, so one run's ratio says little.
# Why a fresh file system: ext4 skips recently freed inodes when it allocates
# one, and a run after the removal of a run's 20,000 files pays for it
# (bench/serve/README.md).
#
#   sudo EUTAXY=build-rel/eutaxy EUTAXY_BASE=/tmp/cbfc430/build/eutaxy bench/serve/touch-rounds.sh
#
# Needs root (mkfs.ext4, mount -o loop). ROUNDS (default 6), TOUCH (10000),
# IMAGE (the file system's image file, default /tmp/eutaxy-touch.img, 4 GB,
# removed at the end) and MNT (its mount point, default a new temporary
# folder) may be set.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
: "${EUTAXY:?set EUTAXY to the eutaxy binary, e.g. EUTAXY=build-rel/eutaxy}"
: "${EUTAXY_BASE:?set EUTAXY_BASE to the eutaxy binary to compare with}"
ROUNDS=${ROUNDS:-6}
IMAGE=${IMAGE:-/tmp/eutaxy-touch.img}
export TOUCH=${TOUCH:-10000}

[ "$(id -u)" = 0 ] || { echo "touch-rounds.sh: needs root, for mkfs.ext4 and mount" >&2; exit 2; }
case $ROUNDS in ''|*[!0-9]*|0) echo "touch-rounds.sh: ROUNDS must be a positive integer, not '$ROUNDS'" >&2; exit 2 ;; esac
for tool in mkfs.ext4 mount umount truncate; do
  command -v "$tool" > /dev/null || { echo "touch-rounds.sh: $tool is not installed" >&2; exit 2; }
done
absolute() { echo "$(cd "$(dirname "$1")" && pwd)/$(basename "$1")"; }
EUTAXY=$(absolute "$EUTAXY")
EUTAXY_BASE=$(absolute "$EUTAXY_BASE")
export EUTAXY EUTAXY_BASE

mnt=${MNT:-$(mktemp -d)}
out=$(mktemp)
mounted=0
cleanup() {
  if [ "$mounted" = 1 ]; then umount "$mnt" || true; fi
  rm -f "$out" "$IMAGE"
  [ -n "${MNT:-}" ] || rmdir "$mnt" 2> /dev/null || true
}
trap cleanup EXIT

truncate -s 4G "$IMAGE"
ratios=()
echo "| round | order | eutaxy, new objects/s | base | ratio |"
echo "|---|---|---|---|---|"
for round in $(seq "$ROUNDS"); do
  if [ $((round % 2)) = 1 ]; then order="eutaxy base"; else order="base eutaxy"; fi
  mkfs.ext4 -q -F "$IMAGE"
  mount -o loop "$IMAGE" "$mnt"
  mounted=1
  TMPDIR=$mnt WORKLOADS=touch SERVERS="$order" "$here/run.sh" > "$out" 2> "$out.err" ||
    { echo "touch-rounds.sh: round $round: run.sh failed:" >&2; tail -5 "$out.err" >&2; rm -f "$out.err"; exit 1; }
  rm -f "$out.err"
  umount "$mnt"
  mounted=0
  # the touch table's rows: | server | objects | 2xx | failed | cut off | ms | new objects/s | ...
  e=$(awk -F'|' '$2 ~ /^ eutaxy / { gsub(/ /, "", $8); print $8 }' "$out")
  b=$(awk -F'|' '$2 ~ /^ base / { gsub(/ /, "", $8); print $8 }' "$out")
  failed=$(awk -F'|' '$2 ~ /^ (eutaxy|base) / { gsub(/ /, "", $5); gsub(/ /, "", $6); if ($5 != "0" || $6 != "0") print $2 }' "$out")
  if [ -z "$e" ] || [ -z "$b" ] || [ -n "$failed" ]; then
    echo "touch-rounds.sh: round $round: no clean touch figures from run.sh:" >&2
    cat "$out" >&2
    exit 1
  fi
  r=$(awk -v e="$e" -v b="$b" 'BEGIN { printf "%.2f", (b > 0 ? e / b : 0) }')
  ratios+=("$r")
  echo "| $round | $order | $e | $b | $r |"
done
printf '%s\n' "${ratios[@]}" | sort -n | awk -v rounds="$ROUNDS" '
  { v[NR] = $1; sum += $1 }
  END {
    med = NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2
    printf "\n%d rounds: ratio median %.2f, mean %.2f, from %.2f to %.2f\n", NR, med, sum / NR, v[1], v[NR]
  }'
