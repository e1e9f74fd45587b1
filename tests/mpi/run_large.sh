#!/usr/bin/env bash
# Runs large_check (messages above 2 GiB through every collective) on the lab with
# coll/dualrail selected, and checks the results and that coll/dualrail ran every one of
# them: on every rank MPI_COMM_WORLD's counters (verbose 1, printed when it is freed) show
# each kind's calls with none handed to the previous module.
# --no-down: also fail when a plane was declared down (nothing breaks one here).
#   run_large.sh BINARY NP [--no-down] [-- large_check args...]
set -euo pipefail
bin=$1 np=$2; shift 2
no_down=0
[ "${1:-}" != "--no-down" ] || { no_down=1; shift; }
[ "${1:-}" != "--" ] || shift
root=$(cd "$(dirname "$0")/../.." && pwd)
# shellcheck source=tests/mpi/verdict.sh
. "$root/tests/mpi/verdict.sh"
out=$(mktemp)
trap 'rm -f "$out"' EXIT
rc=0
timeout 900 "$root/contrib/lab.sh" mpirun -np "$np" --map-by node \
  --mca coll_dualrail_verbose 1 --mca coll_dualrail_priority 100 \
  "$bin" "$@" >"$out" 2>&1 || rc=$?
cat "$out"
fail() { echo "run_large.sh: $*"; echo "0 passed, 1 failed"; exit 1; }
[ "$rc" -eq 0 ] || fail "mpirun exited $rc"
# Nothing breaks a plane here: a plane declared down is a false detection (a rank that
# computes between calls must not be taken for a dead plane). Not asked of the 2 GiB run:
# there the uncapped lab's veths drop packets under load (TCP retransmits a few dozen
# segments a run), and a plane stalled past stall_timeout by a retransmission timeout is
# failed over and re-admitted as designed, the results still exact.
if [ "$no_down" -eq 1 ] && grep -E "plane [0-9]+ \(.*\) down:" "$out"; then
  fail "a healthy plane was declared down"
fi
verdict_passed "$out" "[1-9][0-9]*" || fail "the check did not pass"
[ $# -gt 0 ] || kinds="allreduce bcast reduce allgather allgatherv reduce_scatter_block
  reduce_scatter gather gatherv scatter scatterv alltoall"
[ $# -eq 0 ] || kinds=${2//,/ } # --only NAME[,NAME...]
kinds=${kinds/allreduce_double/allreduce}
kinds=${kinds/imbalance/allreduce}
for k in $kinds; do
  n=$(grep -Ec "communicator MPI_COMM_WORLD \(cid 0\): [1-9][0-9]* $k call\(s\), 0 handed" "$out" ||
    true)
  [ "$n" -eq "$np" ] || fail "$k: dualrail's counters show it on $n of $np ranks"
done
echo "run_large.sh: dualrail ran $(echo "$kinds" | wc -w) kind(s) above 2 GiB on every rank"
