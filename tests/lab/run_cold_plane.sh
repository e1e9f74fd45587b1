#!/usr/bin/env bash
# Runs a two-rank lab check (cold_plane_check, small_plane_check: their sources say what
# each checks) on lab nodes 0 and 1 of the lab DUALRAIL_LAB_PREFIX, both bounded; passes
# when both ranks exit 0.
#   run_cold_plane.sh BINARY [--trials N]
set -uo pipefail
bin=${1:?usage: run_cold_plane.sh BINARY [--trials N]}; shift
lab=$(cd "$(dirname "$0")/../.." && pwd)/contrib/lab.sh
dir=$(mktemp -d /tmp/dualrail-cold-XXXXXX)
chmod 755 "$dir"
trap 'rm -rf "$dir"' EXIT
timeout -k 5 120 "$lab" exec 0 "$bin" --rank 0 --dir "$dir" "$@" >"$dir/rank0" 2>&1 &
p0=$!
timeout -k 5 120 "$lab" exec 1 "$bin" --rank 1 --dir "$dir" "$@" >"$dir/rank1" 2>&1
r1=$?
wait "$p0"
r0=$?
cat "$dir/rank0" "$dir/rank1"
echo "run_cold_plane.sh: rank 0 exited $r0, rank 1 exited $r1"
[ "$r0" -eq 0 ] && [ "$r1" -eq 0 ] && { echo "run_cold_plane.sh: PASS"; exit 0; }
echo "run_cold_plane.sh: FAIL"
exit 1
