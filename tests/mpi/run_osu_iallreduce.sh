#!/usr/bin/env bash
# OSU's own validation of MPI_Iallreduce with coll/dualrail selected (issue 15):
# osu_iallreduce -c (MPI_FLOAT, 4 B .. 4 MiB) on 4 lab nodes, built outside this
# repository (DUALRAIL_OSU_DIR, default /opt/osu/libexec/osu-micro-benchmarks/mpi/collective;
# exit 77, skipped, without it). Checks: every size "Pass", and on every rank
# MPI_COMM_WORLD's counters show the iallreduce calls on dualrail, none handed over.
set -euo pipefail
dir=${DUALRAIL_OSU_DIR:-/opt/osu/libexec/osu-micro-benchmarks/mpi/collective}
[ -x "$dir/osu_iallreduce" ] || { echo "run_osu_iallreduce.sh: no $dir/osu_iallreduce: skipped"; exit 77; }
root=$(cd "$(dirname "$0")/../.." && pwd)
out=$(mktemp)
trap 'rm -f "$out"' EXIT
rc=0
timeout 600 "$root/contrib/lab.sh" mpirun -np 4 --map-by node --mca coll_dualrail_priority 100 \
  --mca coll_dualrail_verbose 1 "$dir/osu_iallreduce" -c -T mpi_float -m 4:4194304 -i 10 -x 2 \
  >"$out" 2>&1 || rc=$?
cat "$out"
fail() { echo "run_osu_iallreduce.sh: FAIL: $*"; exit 1; }
[ "$rc" -eq 0 ] || fail "mpirun exited $rc"
rows=$(grep -Ec "^[0-9]+ +[0-9.]+ +[0-9.]+ +[0-9.]+ +[0-9.]+ +Pass$" "$out" || true)
[ "$rows" -eq 21 ] || fail "$rows of 21 sizes passed OSU's validation"
! grep -Eq "^[0-9]+ .*Fail" "$out" || fail "OSU's validation failed"
n=$(grep -Ec "communicator MPI_COMM_WORLD \(cid 0\): [1-9][0-9]* iallreduce call\(s\), 0 handed" "$out" || true)
[ "$n" -eq 4 ] || fail "iallreduce on dualrail counted on $n of 4 ranks"
echo "run_osu_iallreduce.sh: PASS: osu_iallreduce -c passes at every size on coll/dualrail"
