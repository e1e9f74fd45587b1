#!/usr/bin/env bash
# Runs stage_fail_check (a rank whose device buffer cannot be staged: its peers get an error,
# never wait for it) on 3 lab nodes through lab.sh mpirun, coll/dualrail selected with the host
# stand-in as its GPU and no coll_dualrail_timeout (the default, no limit).
#   run_stage_fail.sh BINARY
set -euo pipefail
bin=$1
root=$(cd "$(dirname "$0")/../.." && pwd)
# shellcheck source=tests/mpi/verdict.sh
. "$root/tests/mpi/verdict.sh"
out=$(mktemp) err=$(mktemp)
trap 'rm -f "$out" "$err"' EXIT
rc=0
timeout 600 "$root/contrib/lab.sh" mpirun -np 3 --map-by node --mca coll_dualrail_priority 100 \
  --mca coll_dualrail_gpu_standin 1 "$bin" >"$out" 2>"$err" || rc=$?
cat "$out" "$err"
fail() { echo "run_stage_fail.sh: $*"; echo "0 passed, 1 failed"; exit 1; }
[ "$rc" -eq 0 ] || fail "mpirun exited $rc"
verdict_passed "$out" 21 || fail "the check did not pass"
# The failing ranks said why: the injected copy failure, in the component's error line.
n=$(grep -c "failed: .*injected by dr_mem_standin_fail_copies" "$err" || true)
[ "$n" -ge 20 ] || fail "$n component error lines name the injected staging failure (20 expected)"
