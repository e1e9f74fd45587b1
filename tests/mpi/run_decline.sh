#!/usr/bin/env bash
# coll/dualrail asked for (priority 100) at the default verbosity says in one line
# why it declines: a one-process job ("not used: a one-process job", once), and
# an intercommunicator (one line from each group's rank 0: two in all).
#   run_decline.sh BINARY
set -euo pipefail
bin=$1
root=$(cd "$(dirname "$0")/../.." && pwd)
# shellcheck source=tests/mpi/verdict.sh
. "$root/tests/mpi/verdict.sh"
out=$(mktemp)
trap 'rm -f "$out"' EXIT
fail() { cat "$out"; echo "run_decline.sh: $*"; echo "0 passed, 1 failed"; exit 1; }
timeout 300 "$root/contrib/lab.sh" mpirun -np 1 --mca coll_dualrail_priority 100 "$bin" >"$out" 2>&1 ||
  fail "the one-process job failed"
n=$(grep -c "coll/dualrail: not used: a one-process job" "$out" || true)
[ "$n" -eq 1 ] || fail "one-process job: $n decline line(s), expected 1"
timeout 300 "$root/contrib/lab.sh" mpirun -np 4 --map-by node --mca coll_dualrail_priority 100 \
  "$bin" >"$out" 2>&1 || fail "the intercommunicator job failed"
verdict_passed "$out" 1 || fail "the allreduce across the intercommunicator was wrong"
n=$(grep -c "coll/dualrail: declining .*: intercommunicator" "$out" || true)
[ "$n" -eq 2 ] || fail "intercommunicator: $n decline line(s), expected 2 (each group's rank 0)"
cat "$out"
echo "run_decline.sh: one line per decline at the default verbosity"
