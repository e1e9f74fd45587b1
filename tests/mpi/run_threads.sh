#!/usr/bin/env bash
# Runs thread_check (collectives from several threads at once, each on its own
# communicator, MPI_THREAD_MULTIPLE) on the lab with coll/dualrail selected, and
# checks the results and that coll/dualrail ran them: every rank set its
# context up thread safe, and on every rank each thread's communicator
# ("thread<i>", counters printed when it is freed, verbose 1) ran its
# allreduces on dualrail with none handed to the previous module.
#   run_threads.sh BINARY NP [-- thread_check args...]
set -euo pipefail
bin=$1 np=$2; shift 2
[ "${1:-}" != "--" ] || shift
root=$(cd "$(dirname "$0")/../.." && pwd)
# shellcheck source=tests/mpi/verdict.sh
. "$root/tests/mpi/verdict.sh"
out=$(mktemp)
trap 'rm -f "$out"' EXIT
threads=3
prev=
for a in "$@"; do
  [ "$prev" != "--threads" ] || threads=$a
  [ "$a" != "--opposite" ] || threads=2
  prev=$a
done
rc=0
timeout 600 "$root/contrib/lab.sh" mpirun -np "$np" --map-by node \
  --mca coll_dualrail_verbose 1 --mca coll_dualrail_priority 100 \
  "$bin" "$@" >"$out" 2>&1 || rc=$?
cat "$out"
fail() { echo "run_threads.sh: $*"; echo "0 passed, 1 failed"; exit 1; }
[ "$rc" -eq 0 ] || fail "mpirun exited $rc"
verdict_passed "$out" "[1-9][0-9]*" || fail "the check did not pass"
n=$(grep -c "plane(s) on devices .*, thread safe (MPI_THREAD_MULTIPLE)" "$out" || true)
[ "$n" -eq "$np" ] || fail "a thread-safe context on $n of $np ranks"
for ((i = 0; i < threads; i++)); do
  n=$(grep -Ec "communicator thread$i \(cid [0-9]+\): [1-9][0-9]* allreduce call\(s\), 0 handed" \
      "$out" || true)
  [ "$n" -eq "$np" ] || fail "communicator thread$i ran its allreduces on dualrail on $n of $np ranks"
done
echo "run_threads.sh: $threads threads per rank ran their collectives on dualrail on every rank"
