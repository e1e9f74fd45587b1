#!/usr/bin/env bash
# Runs a two-rank lab check (cold_plane_check, small_plane_check, probe_backoff_check: their
# sources say what each checks) on lab nodes 0 and 1 of the lab DUALRAIL_LAB_PREFIX, both
# bounded; passes when both ranks exit 0. --reset FROM TO: node 1's plane A is reset
# (lab.sh fault 1 a reset) FROM seconds after the start and healed TO seconds after it
# (healed on every exit); the other arguments go to the check.
#   run_cold_plane.sh BINARY [--reset FROM TO] [CHECK ARGS...]
set -uo pipefail
bin=${1:?usage: run_cold_plane.sh BINARY [--reset FROM TO] [CHECK ARGS...]}; shift
from='' to=''
if [ "${1:-}" = --reset ]; then
  from=${2:?--reset FROM TO} to=${3:?--reset FROM TO}
  shift 3
fi
lab=$(cd "$(dirname "$0")/../.." && pwd)/contrib/lab.sh
dir=$(mktemp -d /tmp/dualrail-cold-XXXXXX)
chmod 755 "$dir"
trap '[ -z "$from" ] || "$lab" fault 1 a heal >/dev/null 2>&1; rm -rf "$dir"' EXIT
timeout -k 5 120 "$lab" exec 0 "$bin" --rank 0 --dir "$dir" "$@" >"$dir/rank0" 2>&1 &
p0=$!
timeout -k 5 120 "$lab" exec 1 "$bin" --rank 1 --dir "$dir" "$@" >"$dir/rank1" 2>&1 &
p1=$!
if [ -n "$from" ]; then
  # The checks start their loops once both have connected (well under a second on the lab).
  sleep "$from"
  "$lab" fault 1 a reset
  sleep "$(awk -v a="$from" -v b="$to" 'BEGIN { print b - a }')"
  "$lab" fault 1 a heal
fi
wait "$p1"
r1=$?
wait "$p0"
r0=$?
cat "$dir/rank0" "$dir/rank1"
echo "run_cold_plane.sh: rank 0 exited $r0, rank 1 exited $r1"
[ "$r0" -eq 0 ] && [ "$r1" -eq 0 ] && { echo "run_cold_plane.sh: PASS"; exit 0; }
echo "run_cold_plane.sh: FAIL"
exit 1
