#!/usr/bin/env bash
# Runs nb_check (non-blocking collectives) on the lab with coll/dualrail
# selected and checks the results and that coll/dualrail ran them: on every
# rank MPI_COMM_WORLD's and the reversed split's counters (verbose 1, printed
# when the communicator is freed) show iallreduce, ibcast, iallgather,
# ibarrier, ireduce_scatter_block and ialltoall calls on dualrail with none
# handed to the previous module; on the communicator "fallback" every
# ireduce_scatter_block and ialltoall call (a user-defined op, a derived
# datatype) was handed to the previous module and the ibarriers were not;
# and the statistics table at finalize (coll_dualrail_stats 1) has the rows
# of the two block kinds with those 2 handed over each.
# --off KIND (with the MCA switch that turns KIND's blocking form off): KIND is
# not taken by dualrail at all (no counter line on any rank), and the check
# still passes, on the next component. --device runs the component with the
# host stand-in as its GPU (coll_dualrail_gpu_standin; pass --device to
# nb_check too). --thread-completes yes|no (runs with the progress thread): every
# rank's line at finalize says the progress thread completed requests itself (yes:
# MPI_THREAD_MULTIPLE) or none, handing them all to the application's thread (no).
#   run_nb.sh BINARY NP [--mca NAME VALUE | --off KIND | --device | --thread-completes yes|no]...
#             [-- nb_check args...]
set -euo pipefail
bin=$1 np=$2; shift 2
mca=() off=" " thread_completes=
while :; do
  case ${1:-} in
    --mca) mca+=(--mca "$2" "$3"); shift 3 ;;
    --off) off+="$2 "; shift 2 ;;
    --device) mca+=(--mca coll_dualrail_gpu_standin 1); shift ;;
    --thread-completes) thread_completes=$2; shift 2 ;;
    *) break ;;
  esac
done
[ "${1:-}" != "--" ] || shift
root=$(cd "$(dirname "$0")/../.." && pwd)
# shellcheck source=tests/mpi/verdict.sh
. "$root/tests/mpi/verdict.sh"
out=$(mktemp)
trap 'rm -f "$out"' EXIT
rc=0
timeout 600 "$root/contrib/lab.sh" mpirun -np "$np" --map-by node \
  --mca coll_dualrail_verbose 1 --mca coll_dualrail_priority 100 --mca coll_dualrail_stats 1 \
  "${mca[@]}" "$bin" "$@" >"$out" 2>&1 || rc=$?
cat "$out"
fail() { echo "run_nb.sh: $*"; echo "0 passed, 1 failed"; exit 1; }
[ "$rc" -eq 0 ] || fail "mpirun exited $rc"
verdict_passed "$out" "[1-9][0-9]*" || fail "the check did not pass"
count() { grep -Ec "$1" "$out" || true; }
for k in iallreduce ibcast iallgather ibarrier ireduce_scatter_block ialltoall; do
  if [ "${off#* $k }" != "$off" ]; then
    n=$(count "communicator .* \(cid [0-9]+\): [0-9]+ $k call\(s\)")
    [ "$n" -eq 0 ] || fail "$k is switched off but dualrail counted it on $n communicator(s)"
    continue
  fi
  for c in MPI_COMM_WORLD reversed; do
    n=$(count "communicator $c \(cid [0-9]+\): [1-9][0-9]* $k call\(s\), 0 handed")
    [ "$n" -eq "$np" ] || fail "$c: $k calls on dualrail counted on $n of $np ranks"
  done
done
for k in ireduce_scatter_block ialltoall; do
  [ "${off#* $k }" = "$off" ] || continue
  n=$(count "communicator fallback \(cid [0-9]+\): 2 $k call\(s\), 2 handed")
  [ "$n" -eq "$np" ] || fail "fallback: $k handed to the previous module on $n of $np ranks"
  n=$(count "^ +$k +[1-9][0-9]* +2$")
  [ "$n" -eq "$np" ] || fail "statistics table: a $k row with 2 handed over on $n of $np ranks"
done
n=$(count "communicator fallback \(cid [0-9]+\): 2 ibarrier call\(s\), 0 handed")
[ "$n" -eq "$np" ] || fail "fallback: ibarrier on dualrail counted on $n of $np ranks"
if [ -n "$thread_completes" ]; then
  # "progress thread: N collective(s) completed on it, M handed to the application's thread"
  line="progress thread: ([0-9]+) collective\(s\) completed on it, ([0-9]+) handed"
  n=$(count "$line")
  [ "$n" -eq "$np" ] || fail "the progress thread's completions reported on $n of $np ranks"
  while read -r on handed; do
    if [ "$thread_completes" = yes ]; then
      [ "$on" -ge 1 ] || fail "MPI_THREAD_MULTIPLE: the progress thread completed no request itself"
    else
      [ "$on" -eq 0 ] && [ "$handed" -ge 1 ] ||
        fail "not MPI_THREAD_MULTIPLE: the progress thread completed $on request(s) itself" \
          "(must be 0) and handed $handed to the application's thread (must be >= 1)"
    fi
  done < <(grep -Eo "$line" "$out" | sed -E "s/$line/\1 \2/")
  echo "run_nb.sh: requests completed as the thread level allows ($thread_completes on the progress thread)"
fi
echo "run_nb.sh: every rank ran its non-blocking collectives on dualrail, the declined ones on the previous module"
