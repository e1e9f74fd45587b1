#!/usr/bin/env bash
# Runs nb_check (non-blocking collectives) on the lab with coll/dualrail
# selected and checks the results and that coll/dualrail ran them: on every
# rank MPI_COMM_WORLD's and the reversed split's counters (verbose 1, printed
# when the communicator is freed) show iallreduce, ibcast, iallgather and
# ibarrier calls on dualrail with none handed to the previous module.
#   run_nb.sh BINARY NP [--mca NAME VALUE]... [-- nb_check args...]
set -euo pipefail
bin=$1 np=$2; shift 2
mca=()
while [ "${1:-}" = "--mca" ]; do mca+=(--mca "$2" "$3"); shift 3; done
[ "${1:-}" != "--" ] || shift
root=$(cd "$(dirname "$0")/../.." && pwd)
# shellcheck source=tests/mpi/verdict.sh
. "$root/tests/mpi/verdict.sh"
out=$(mktemp)
trap 'rm -f "$out"' EXIT
rc=0
timeout 600 "$root/contrib/lab.sh" mpirun -np "$np" --map-by node \
  --mca coll_dualrail_verbose 1 --mca coll_dualrail_priority 100 "${mca[@]}" \
  "$bin" "$@" >"$out" 2>&1 || rc=$?
cat "$out"
fail() { echo "run_nb.sh: $*"; echo "0 passed, 1 failed"; exit 1; }
[ "$rc" -eq 0 ] || fail "mpirun exited $rc"
verdict_passed "$out" "[1-9][0-9]*" || fail "the check did not pass"
for c in MPI_COMM_WORLD reversed; do
  for k in iallreduce ibcast iallgather ibarrier; do
    n=$(grep -Ec "communicator $c \(cid [0-9]+\): [1-9][0-9]* $k call\(s\), 0 handed" "$out" || true)
    [ "$n" -eq "$np" ] || fail "$c: $k calls on dualrail counted on $n of $np ranks"
  done
done
echo "run_nb.sh: every rank ran its non-blocking collectives on dualrail"
