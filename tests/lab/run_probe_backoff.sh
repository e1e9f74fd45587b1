#!/usr/bin/env bash
# probe_backoff_check on lab nodes 0 and 1 of the lab DUALRAIL_LAB_PREFIX, with node 1's
# plane A reset (lab.sh fault 1 a reset) from 2 s to 5 s of its 10-s loop; passes when both
# ranks exit 0. Bounded: each rank under timeout 60, the fault healed on every exit.
#   run_probe_backoff.sh BINARY
set -uo pipefail
bin=${1:?usage: run_probe_backoff.sh BINARY}
lab=$(cd "$(dirname "$0")/../.." && pwd)/contrib/lab.sh
dir=$(mktemp -d /tmp/dualrail-probe-XXXXXX)
chmod 755 "$dir"
trap '"$lab" fault 1 a heal >/dev/null 2>&1; rm -rf "$dir"' EXIT
timeout -k 5 60 "$lab" exec 0 "$bin" --rank 0 --dir "$dir" >"$dir/rank0" 2>&1 &
p0=$!
timeout -k 5 60 "$lab" exec 1 "$bin" --rank 1 --dir "$dir" >"$dir/rank1" 2>&1 &
p1=$!
# The loop starts once both have connected (well under a second on the lab).
sleep 2
"$lab" fault 1 a reset
sleep 3
"$lab" fault 1 a heal
wait "$p0"
r0=$?
wait "$p1"
r1=$?
cat "$dir/rank0" "$dir/rank1"
echo "run_probe_backoff.sh: rank 0 exited $r0, rank 1 exited $r1"
[ "$r0" -eq 0 ] && [ "$r1" -eq 0 ] && { echo "run_probe_backoff.sh: PASS"; exit 0; }
echo "run_probe_backoff.sh: FAIL"
exit 1
