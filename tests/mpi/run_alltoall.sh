#!/usr/bin/env bash
# Runs alltoall_check (MPI_Alltoall, MPI_Alltoallv) on the lab through
# lab.sh mpirun with coll/dualrail selected, and checks the results and that
# coll/dualrail ran them: on every rank MPI_COMM_WORLD's module took alltoall
# and alltoallv, and its counters (printed when the communicator is freed,
# verbose 1) show calls that ran on dualrail and the derived-datatype cases
# handed to the previous module; the statistics table at MPI_Finalize
# (coll_dualrail_stats 1) lists both kinds.
# --off switches both off (coll_dualrail_alltoall/alltoallv 0): the results
# must still be right, and dualrail must not have taken them.
# --device runs the component with the host stand-in as its GPU
# (coll_dualrail_gpu_standin; pass --device to alltoall_check too).
# --mca K V passes an MCA parameter on (a forced algorithm, a window).
#   run_alltoall.sh BINARY NP [--oversubscribe] [--off] [--device] [--mca K V]... [-- args...]
set -euo pipefail
bin=$1 np=$2; shift 2
over=() off=0 device=0 extra=()
while [ $# -gt 0 ]; do
  case "$1" in
    --oversubscribe) over=(--oversubscribe) ;;
    --off) off=1 ;;
    --device) device=1 ;;
    --mca) extra+=(--mca "${2:?}" "${3:?}"); shift 2 ;;
    --) shift; break ;;
    *) echo "run_alltoall.sh: unknown option $1" >&2; exit 2 ;;
  esac
  shift
done
root=$(cd "$(dirname "$0")/../.." && pwd)
# shellcheck source=tests/mpi/verdict.sh
. "$root/tests/mpi/verdict.sh"
out=$(mktemp)
trap 'rm -f "$out"' EXIT
mca=(--mca coll_dualrail_verbose 1 --mca coll_dualrail_priority 100 --mca coll_dualrail_stats 1)
[ "$off" -eq 0 ] || mca+=(--mca coll_dualrail_alltoall 0 --mca coll_dualrail_alltoallv 0)
[ "$device" -eq 0 ] || mca+=(--mca coll_dualrail_gpu_standin 1)
mca+=(${extra[@]+"${extra[@]}"})
rc=0
timeout 300 "$root/contrib/lab.sh" mpirun -np "$np" --map-by node "${over[@]}" "${mca[@]}" \
  "$bin" "$@" >"$out" 2>&1 || rc=$?
cat "$out"
fail() { echo "run_alltoall.sh: $*"; echo "0 passed, 1 failed"; exit 1; }
[ "$rc" -eq 0 ] || fail "mpirun exited $rc"
verdict_passed "$out" || fail "the check did not pass"
world="communicator MPI_COMM_WORLD .*allreduce runs on dualrail"
if [ "$off" -eq 1 ]; then
  n=$(grep -c "$world" "$out" || true)
  [ "$n" -eq "$np" ] || fail "coll/dualrail ran allreduce on $n of $np ranks"
  if grep -Eq "$world.*, alltoall" "$out"; then
    fail "a collective switched off was taken"
  fi
  if grep -Eq "[0-9]+ alltoallv? call\(s\)" "$out"; then
    fail "a collective switched off reached coll/dualrail"
  fi
  exit 0
fi
n=$(grep -c "$world.*, alltoall, alltoallv" "$out" || true)
[ "$n" -eq "$np" ] || fail "coll/dualrail took alltoall and alltoallv on $n of $np ranks"
# MPI_COMM_WORLD's counters: C calls, F handed to the previous module (the derived-datatype
# case); C > F >= 1 means calls ran on dualrail and the fallback went where it should.
for coll in alltoall alltoallv; do
  lines=$(grep -E "MPI_COMM_WORLD \(cid 0\): [0-9]+ $coll call\(s\), [0-9]+ handed" "$out" || true)
  n=$(printf '%s' "$lines" | grep -c . || true)
  [ "$n" -eq "$np" ] || fail "$coll counters printed by $n of $np ranks"
  bad=$(printf '%s\n' "$lines" | awk -v c="$coll" '{
      for (i = 1; i <= NF; i++) if ($i == c) { calls = $(i - 1); fb = $(i + 2) }
      if (calls <= fb || fb < 1) print }')
  [ -z "$bad" ] || fail "$coll counters do not show dualrail and the fallbacks: $bad"
  # the statistics table sums every communicator's calls of the kind
  n=$(grep -Ec "^ +$coll +[0-9]+ +[0-9]+$" "$out" || true)
  [ "$n" -eq "$np" ] || fail "the statistics table lists $coll on $n of $np ranks"
done
# The derived communicators ran on dualrail too (with 2 ranks the odd/even split has one
# each, which the module does not serve).
comms=(dup reversed)
[ "$np" -lt 3 ] || comms+=(split)
for c in "${comms[@]}"; do
  grep -Eq "communicator $c \(cid [0-9]+\): [0-9]+ alltoallv call\(s\), 0 handed" "$out" ||
    fail "no alltoallv counters for communicator $c"
done
echo "run_alltoall.sh: dualrail ran alltoall and alltoallv on every rank"
