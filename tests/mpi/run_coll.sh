#!/usr/bin/env bash
# Runs coll_check (MPI_Bcast, MPI_Barrier, MPI_Allgather, MPI_Reduce,
# MPI_Reduce_scatter_block, MPI_Reduce_scatter, MPI_Allgatherv, MPI_Gather(v),
# MPI_Scatter(v)) on the lab through lab.sh
# mpirun with coll/dualrail selected, and checks the results and that
# coll/dualrail ran them: on every rank MPI_COMM_WORLD's module took them
# all, and its counters (printed when the communicator is freed, verbose 1)
# show calls that ran on dualrail and the derived-datatype (and user-op)
# cases handed to the previous module.
# --off switches them off (coll_dualrail_bcast/barrier/allgather/reduce/
# reduce_scatter_block/reduce_scatter/allgatherv/gather(v)/scatter(v) 0): the results must still be right,
# and dualrail must not have taken them.
# --device runs the component with the host stand-in as its GPU
# (coll_dualrail_gpu_standin; pass --device to coll_check too).
# --mca NAME VALUE is passed on to mpirun (repeatable; e.g. an algorithm forced).
#   run_coll.sh BINARY NP [--oversubscribe] [--off] [--device] [--mca N V]... [-- args...]
set -euo pipefail
bin=$1 np=$2; shift 2
over=() off=0 device=0 extra=()
while [ $# -gt 0 ]; do
  case "$1" in
    --mca) extra+=(--mca "${2:?}" "${3:?}"); shift 2 ;;
    --oversubscribe) over=(--oversubscribe) ;;
    --off) off=1 ;;
    --device) device=1 ;;
    --) shift; break ;;
    *) echo "run_coll.sh: unknown option $1" >&2; exit 2 ;;
  esac
  shift
done
root=$(cd "$(dirname "$0")/../.." && pwd)
# shellcheck source=tests/mpi/verdict.sh
. "$root/tests/mpi/verdict.sh"
out=$(mktemp) err=$(mktemp) verdict=$(mktemp)
trap 'rm -f "$out" "$err" "$verdict"' EXIT
mca=(--mca coll_dualrail_verbose 1 --mca coll_dualrail_priority 100)
[ "$off" -eq 0 ] || mca+=(--mca coll_dualrail_bcast 0 --mca coll_dualrail_barrier 0
                          --mca coll_dualrail_allgather 0 --mca coll_dualrail_reduce 0
                          --mca coll_dualrail_reduce_scatter_block 0
                          --mca coll_dualrail_reduce_scatter 0 --mca coll_dualrail_allgatherv 0
                          --mca coll_dualrail_gather 0 --mca coll_dualrail_gatherv 0
                          --mca coll_dualrail_scatter 0 --mca coll_dualrail_scatterv 0)
[ "$device" -eq 0 ] || mca+=(--mca coll_dualrail_gpu_standin 1)
mca+=("${extra[@]}")
rc=0
# The ranks' stdout (the verdict) apart from their stderr (coll/dualrail's lines): mpirun
# forwards the two streams of a rank independently, so a stdout line could land in the middle
# of a stderr line (seen with the per-kind counter lines printed as communicators are freed).
timeout 600 "$root/contrib/lab.sh" mpirun -np "$np" --map-by node "${over[@]}" "${mca[@]}" \
  "$bin" "$@" >"$verdict" 2>"$err" || rc=$?
cat "$verdict" "$err" >"$out"
cat "$out"
fail() { echo "run_coll.sh: $*"; echo "0 passed, 1 failed"; exit 1; }
[ "$rc" -eq 0 ] || fail "mpirun exited $rc"
verdict_passed "$verdict" || fail "the check did not pass"
world="communicator MPI_COMM_WORLD .*allreduce runs on dualrail"
if [ "$off" -eq 1 ]; then
  n=$(grep -c "$world" "$out" || true)
  [ "$n" -eq "$np" ] || fail "coll/dualrail ran allreduce on $n of $np ranks"
  if grep -Eq "$world, (bcast|barrier|allgather|reduce|gather|scatter)" "$out"; then
    fail "a collective switched off was taken"
  fi
  if grep -Eq "[0-9]+ (bcast|barrier|allgather|reduce|reduce_scatter_block|reduce_scatter|allgatherv|gather|gatherv|scatter|scatterv) call\(s\)" "$out"; then
    fail "a collective switched off reached coll/dualrail"
  fi
  exit 0
fi
n=$(grep -c "$world, bcast, barrier, allgather, alltoall, alltoallv, reduce, reduce_scatter_block, reduce_scatter, allgatherv, gather, gatherv, scatter, scatterv" "$out" || true)
[ "$n" -eq "$np" ] || fail "coll/dualrail did not take every collective on $n of $np ranks"
# MPI_COMM_WORLD's counters: C calls, F handed to the previous module (the derived-datatype
# and user-op cases); C > F means calls ran on dualrail.
for coll in bcast allgather barrier reduce reduce_scatter_block reduce_scatter allgatherv gather \
  gatherv scatter scatterv; do
  lines=$(grep -E "MPI_COMM_WORLD \(cid 0\): [0-9]+ $coll call\(s\), [0-9]+ handed" "$out" || true)
  n=$(printf '%s' "$lines" | grep -c . || true)
  [ "$n" -eq "$np" ] || fail "$coll counters printed by $n of $np ranks"
  bad=$(printf '%s\n' "$lines" | awk -v c="$coll" '{
      for (i = 1; i <= NF; i++) if ($i == c) { calls = $(i - 1); fb = $(i + 2) }
      if (calls <= fb || (c != "barrier" && fb < 1) || (c == "barrier" && fb != 0)) print }')
  [ -z "$bad" ] || fail "$coll counters do not show dualrail and the fallbacks: $bad"
done
# The derived communicators ran on dualrail too (MPI_Bcast returns before any component on
# a one-process communicator, and with 2 ranks the odd/even split has one each).
comms=(dup reversed)
[ "$np" -lt 3 ] || comms+=(split)
for c in "${comms[@]}"; do
  for coll in bcast reduce reduce_scatter_block reduce_scatter allgatherv gather gatherv scatter \
    scatterv; do
    grep -Eq "communicator $c \(cid [0-9]+\): [0-9]+ $coll call\(s\), 0 handed" "$out" ||
      fail "no $coll counters for communicator $c"
  done
done
echo "run_coll.sh: dualrail ran bcast, barrier, allgather, reduce, reduce_scatter_block, reduce_scatter, allgatherv, gather(v) and scatter(v) on every rank"
