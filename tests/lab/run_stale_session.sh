#!/usr/bin/env bash
# lab.sh mpirun starts although a session directory named for its launcher's pid is left
# over from a launcher that was killed: Open MPI 5's PRRTE refused to start then
# ("prte_session_dir failed ... Exists"), and pids recycle. The stale directory is made
# for the very pid the launcher will have (this test's inner shell, which exec's lab.sh,
# and lab.sh exec's mpirun), with a file in it; the job must run on both nodes and the
# directory must be gone. On the lab DUALRAIL_LAB_PREFIX (2 nodes or more), bounded.
set -uo pipefail
lab=$(cd "$(dirname "$0")/../.." && pwd)/contrib/lab.sh
out=$(timeout -k 5 90 bash -c '
  d=${TMPDIR:-/tmp}/prterun.node0.$$.0
  mkdir -p "$d/0" && echo stale >"$d/0/left" || exit 3
  echo "stale: $d"
  exec "$1" mpirun -np 2 --map-by node hostname' _ "$lab" 2>&1)
rc=$?
echo "$out"
dir=$(sed -n 's/^stale: //p' <<<"$out")
fail=0
[ "$rc" -eq 0 ] || { echo "run_stale_session.sh: FAIL: the job exited $rc"; fail=1; }
for n in node0 node1; do
  grep -qx "$n" <<<"$out" || { echo "run_stale_session.sh: FAIL: no rank ran on $n"; fail=1; }
done
if [ -z "$dir" ]; then
  echo "run_stale_session.sh: FAIL: the stale directory was not made"; fail=1
elif [ -e "$dir" ]; then
  echo "run_stale_session.sh: FAIL: $dir is still there"; rm -rf "$dir"; fail=1
fi
[ "$fail" -eq 0 ] && { echo "run_stale_session.sh: PASS"; exit 0; }
echo "run_stale_session.sh: FAIL"
exit 1
