#!/usr/bin/env bash
# Runs the mpi4py client (tests/mpi/mpi4py_client.py, Debian's python3-mpi4py
# and python3-numpy, default initialisation: MPI_THREAD_MULTIPLE) on the lab
# with coll/dualrail selected, and checks:
#   - every result exact ("N passed, 0 failed"), the job exits 0;
#   - coll/dualrail was selected and ran the calls: on every rank the context
#     is thread safe, MPI_COMM_WORLD's module took the collectives, and its
#     counters (verbose 1) show allreduce, bcast and allgather calls on
#     dualrail with none handed to the previous module, on MPI_COMM_WORLD and
#     on both threads' communicators (py_thread0, py_thread1), and the
#     world's Iallreduce calls on dualrail (non-blocking, none handed over);
#   - with --fault KIND: plane A of node 1 is cut (lab.sh fault) --fault-at s
#     after the loop's start and healed at --heal-at; every result still
#     exact, plane 0 declared down by some rank and re-admitted after the heal.
#   run_mpi4py.sh NP [--fault blackhole|down|reset] [--seconds S]
#                    [--fault-at S] [--heal-at S]
# Environment: DUALRAIL_LAB_PREFIX, DUALRAIL_BUILD_DIR (as lab.sh).
set -uo pipefail
np=$1; shift
kind='' seconds=4 fault_at=2 heal_at=5
while [ $# -gt 0 ]; do
  case $1 in
    --fault) kind=${2:?}; shift ;;
    --seconds) seconds=${2:?}; shift ;;
    --fault-at) fault_at=${2:?}; shift ;;
    --heal-at) heal_at=${2:?}; shift ;;
    *) echo "run_mpi4py.sh: unknown option $1" >&2; exit 2 ;;
  esac
  shift
done
[ -z "$kind" ] || [ "$seconds" != 4 ] || seconds=9
root=$(cd "$(dirname "$0")/../.." && pwd)
# shellcheck source=tests/mpi/verdict.sh
. "$root/tests/mpi/verdict.sh"
lab=$root/contrib/lab.sh
# shellcheck source=contrib/lib/schedule.sh
. "$root/contrib/lib/schedule.sh" # stamp, sleep_until
/usr/bin/python3 -c 'import mpi4py, numpy' 2>/dev/null ||
  { echo "run_mpi4py.sh: python3-mpi4py and python3-numpy are needed (contrib/setup.sh)"; exit 1; }
out=$(mktemp) err=$(mktemp)
heal() { [ -z "$kind" ] || "$lab" fault 1 a heal >/dev/null 2>&1 || true; }
trap 'heal; rm -f "$out" "$err"' EXIT
heal
fail() { echo "run_mpi4py.sh: FAIL: $*"; exit 1; }
# The ranks' stdout (the client's lines, its verdict) apart from their stderr (coll/dualrail's
# lines): mpirun forwards a rank's two streams independently, and one stream into both once
# put another rank's stderr line right after rank 0's verdict, on its line ("2472 passed, 0
# failed[node1:4142] coll/dualrail: ...", a CI run of mpi4py_client_blackhole).
{ timeout -k 10 $((${seconds%.*} + 120)) "$lab" mpirun -np "$np" --map-by node \
    --mca coll_dualrail_priority 100 --mca coll_dualrail_verbose 1 \
    /usr/bin/python3 "$root/tests/mpi/mpi4py_client.py" --seconds "$seconds" 2>"$err"
  echo "JOB-EXIT $?"; } | stamp >"$out" &
job=$!
if [ -n "$kind" ]; then
  t0=
  for _ in $(seq 1 600); do
    t0=$(sed -n 's/^[0-9.]* mpi4py_client: start \([0-9.]*\):.*/\1/p' "$out" | head -1)
    [ -n "$t0" ] && break
    grep -q "JOB-EXIT" "$out" && break
    sleep 0.1
  done
  [ -n "$t0" ] || { wait "$job"; cut -d' ' -f2- "$out"; fail "the loop never started"; }
  sleep_until "$(awk -v a="$t0" -v b="$fault_at" 'BEGIN { printf "%.6f", a + b }')"
  "$lab" fault 1 a "$kind"
  echo "run_mpi4py.sh: $(date +%T.%N | cut -c1-12) node 1 plane a $kind"
  sleep_until "$(awk -v a="$t0" -v b="$heal_at" 'BEGIN { printf "%.6f", a + b }')"
  "$lab" fault 1 a heal
  echo "run_mpi4py.sh: $(date +%T.%N | cut -c1-12) node 1 plane a healed"
fi
wait "$job"
cut -d' ' -f2- "$out"
cat "$err"
rc=$(sed -n 's/^[0-9.]* JOB-EXIT \([0-9]*\)$/\1/p' "$out" | tail -1)
[ "$rc" = 0 ] || fail "the job exited ${rc:-?}"
verdict_passed "$out" "[0-9.]+ [1-9][0-9]*" || fail "the client's results are not all exact"
cat "$err" >>"$out" # the component's lines, for the checks below
! grep -q "WRONG RESULT" "$out" || fail "wrong results"
n=$(grep -c "plane(s) on devices .*, thread safe (MPI_THREAD_MULTIPLE)" "$out" || true)
[ "$n" -eq "$np" ] || fail "a thread-safe context on $n of $np ranks"
n=$(grep -c "communicator MPI_COMM_WORLD .*allreduce runs on dualrail, bcast, barrier, allgather" "$out" || true)
[ "$n" -eq "$np" ] || fail "coll/dualrail took MPI_COMM_WORLD's collectives on $n of $np ranks"
for c in MPI_COMM_WORLD py_thread0 py_thread1; do
  for k in allreduce bcast allgather; do
    n=$(grep -Ec "communicator $c \(cid [0-9]+\): [1-9][0-9]* $k call\(s\), 0 handed" "$out" || true)
    [ "$n" -eq "$np" ] || fail "$c: $k calls on dualrail counted on $n of $np ranks"
  done
done
# Iallreduce (the world's loop): run on dualrail as a non-blocking collective.
n=$(grep -Ec "communicator MPI_COMM_WORLD \(cid 0\): [1-9][0-9]* iallreduce call\(s\), 0 handed" "$out" || true)
[ "$n" -eq "$np" ] || fail "MPI_COMM_WORLD: iallreduce calls on dualrail counted on $n of $np ranks"
if [ -n "$kind" ]; then
  grep -Eq "coll/dualrail rank [0-9]+: peer [0-9]+ .*plane 0 .* down:" "$out" ||
    fail "plane 0 was never declared down"
  grep -Eq "coll/dualrail rank [0-9]+: peer [0-9]+ .*plane 0 .* re-admitted" "$out" ||
    fail "plane 0 was never re-admitted"
fi
echo "run_mpi4py.sh: PASS: exact results, coll/dualrail ran every rank's calls${kind:+, through a $kind of plane A on node 1}"
