#!/usr/bin/env bash
# Runs allreduce_check on the lab through lab.sh mpirun and checks both the
# results and that coll/dualrail was (or, with --stock, was not) the one used.
# --mismatch gives the last rank other planes than the rest (PLANES, e.g.
# "ethA" or "ethA,ethZ"): the job must agree to stay off dualrail everywhere,
# say why, and still compute correctly through the previous module.
# --stats asks for the per-plane table at MPI_Finalize and checks it.
# --weights VALUE sets coll_dualrail_weights; with --stats the table's weights
# section must show plane 0's share toward rank 1 as --share0 S (e.g. 0.667
# for "2:1"). --bad-weights VALUE: an invalid setting: dualrail must stay off
# on every rank with a reason naming the value, results still exact.
# --device runs the component with the host stand-in as its GPU
# (coll_dualrail_gpu_standin; pass --device to allreduce_check too) and checks
# that every rank staged device buffers on every communicator it used.
#   run_allreduce.sh BINARY NP [--stock] [--oversubscribe] [--mismatch PLANES] [--stats]
#                    [--device] [--weights VALUE [--share0 S]] [--bad-weights VALUE]
#                    [-- args...]
set -euo pipefail
bin=$1 np=$2; shift 2
stock=0 over=() mismatch='' stats=0 device=0 weights='' share0='' bad_weights=''
while [ $# -gt 0 ]; do
  case "$1" in
    --stock) stock=1 ;;
    --oversubscribe) over=(--oversubscribe) ;;
    --stats) stats=1 ;;
    --device) device=1 ;;
    --mismatch) mismatch=${2:?--mismatch needs a plane list}; shift ;;
    --weights) weights=${2:?--weights needs a value}; shift ;;
    --share0) share0=${2:?--share0 needs a share}; shift ;;
    --bad-weights) bad_weights=${2:?--bad-weights needs a value}; shift ;;
    --) shift; break ;;
    *) echo "run_allreduce.sh: unknown option $1" >&2; exit 2 ;;
  esac
  shift
done
root=$(cd "$(dirname "$0")/../.." && pwd)
# shellcheck source=tests/mpi/verdict.sh
. "$root/tests/mpi/verdict.sh"
out=$(mktemp)
trap 'rm -f "$out"' EXIT
mca=(--mca coll_dualrail_verbose 1)
[ "$stock" -eq 1 ] || mca+=(--mca coll_dualrail_priority 100)
[ "$stats" -eq 0 ] || mca+=(--mca coll_dualrail_stats 1)
[ "$device" -eq 0 ] || mca+=(--mca coll_dualrail_gpu_standin 1)
[ -z "$weights" ] || mca+=(--mca coll_dualrail_weights "$weights")
[ -z "$bad_weights" ] || mca+=(--mca coll_dualrail_weights "$bad_weights")
rc=0
if [ -n "$mismatch" ]; then
  # The last rank gets its own plane list from a wrapper that reads its rank, not from a
  # second app context: Open MPI 5.0.7's mpirun crashes on any MPMD command line
  # ("A : B", open-mpi/ompi#13303).
  # shellcheck disable=SC2016
  timeout 600 "$root/contrib/lab.sh" mpirun -np "$np" --map-by node "${mca[@]}" \
    bash -c 'if [ "${OMPI_COMM_WORLD_RANK:-}" = "$1" ]; then export OMPI_MCA_coll_dualrail_planes=$2; fi
             shift 2; exec "$@"' mismatch $((np - 1)) "$mismatch" "$bin" "$@" \
    >"$out" 2>&1 || rc=$?
else
  timeout 600 "$root/contrib/lab.sh" mpirun -np "$np" --map-by node "${over[@]}" "${mca[@]}" \
    "$bin" "$@" >"$out" 2>&1 || rc=$?
fi
cat "$out"
fail() { echo "run_allreduce.sh: $*"; echo "0 passed, 1 failed"; exit 1; }
[ "$rc" -eq 0 ] || fail "mpirun exited $rc"
verdict_passed "$out" || fail "the check did not pass"
if [ "$stats" -eq 1 ]; then
  n=$(grep -c "coll/dualrail rank [0-9]*: plane statistics" "$out" || true)
  [ "$n" -eq "$np" ] || fail "the statistics table was printed by $n of $np ranks"
  grep -Eq "^  1 +ethB +[0-9.]+ +[0-9.]+ +[1-9]" "$out" || fail "no traffic counted on plane 1"
  n=$(grep -c "  weights (${weights:-adaptive}): share of each message per peer and plane" "$out" || true)
  [ "$n" -eq "$np" ] || fail "the weights section was printed by $n of $np ranks"
  if [ -n "$share0" ]; then
    # Rank 0's line toward rank 1, plane 0 (the first table: rank 0's or another's, each
    # rank's shares toward any peer follow the same fixed ratios).
    got=$(awk '/^  peer  plane device/ { t = 1; next } t && $1 ~ /^[0-9]+$/ && $2 == 0 { print $4; exit }' "$out")
    [ "$got" = "$share0" ] || fail "plane 0's share is '$got', expected $share0 (weights $weights)"
  fi
elif [ -n "$bad_weights" ]; then
  grep -q "coll/dualrail: disabled on every rank: rank [0-9]* could not set up its planes: invalid weights '$bad_weights'" "$out" ||
    fail "no clear message that the weights '$bad_weights' are invalid"
  if grep -q "allreduce runs on dualrail" "$out"; then fail "dualrail ran with invalid weights"; fi
elif [ -n "$mismatch" ]; then
  grep -q "coll/dualrail: disabled on every rank: rank $((np - 1)) " "$out" ||
    fail "no clear message that rank $((np - 1))'s planes disagree"
  if grep -q "allreduce runs on dualrail" "$out"; then fail "dualrail ran despite the disagreement"; fi
elif [ "$stock" -eq 1 ]; then
  # Installed but not selected: the component must not even set itself up.
  if grep -q "coll/dualrail" "$out"; then fail "coll/dualrail was active without being asked for"; fi
else
  n=$(grep -c "communicator MPI_COMM_WORLD .*allreduce runs on dualrail" "$out" || true)
  [ "$n" -eq "$np" ] || fail "coll/dualrail ran on $n of $np ranks"
  # Module counters at communicator free: calls reached it, and the fallback cases went through.
  grep -Eq "MPI_COMM_WORLD \(cid 0\): [0-9]+ allreduce call\(s\), [1-9][0-9]* handed to the previous module" "$out" ||
    fail "no evidence that allreduce calls reached coll/dualrail and the fallback cases the previous module"
  if [ "$device" -eq 1 ]; then
    # MPI_COMM_WORLD, the three derived communicators and MPI_COMM_SELF, on every rank.
    n=$(grep -c "coll/dualrail: rank [0-9]*: staging for device buffers on " "$out" || true)
    [ "$n" -eq $((5 * np)) ] || fail "device staging set up $n times, expected $((5 * np)) (5 communicators x $np ranks)"
  fi
fi
