#!/usr/bin/env bash
# verdict_test.sh: verdict_passed (tests/mpi/verdict.sh) on the verdicts seen, both ways.
set -uo pipefail
# shellcheck source=tests/mpi/verdict.sh
. "$(dirname "$0")/verdict.sh"
tmp=$(mktemp)
trap 'rm -f "$tmp"' EXIT
bad=0
# expect WANT COUNT_RE TEXT: verdict_passed on a file holding TEXT must give WANT (0 or 1).
expect() {
  local want=$1 count=$2 got=0
  printf '%b\n' "$3" >"$tmp"
  verdict_passed "$tmp" "$count" || got=1
  if [ "$got" -ne "$want" ]; then
    echo "verdict_test.sh: FAIL: '$3' (count '$count'): got $got, want $want"
    bad=$((bad + 1))
  fi
}
expect 0 '' '39 passed, 0 failed'
expect 0 '' 'coll_check: dup: reductions 0.34 s\n39 passed, 0 failed'
# as Debian 13's mpi_coll_np3 and np5 printed them
expect 0 '' '[node0:31364] coll/dualrail: ran39 passed, 0 failed'
expect 0 '' '[node0:32039 passed, 0 failed'
expect 0 '[1-9][0-9]*' '[node0:31364] coll/dualrail: ran12 passed, 0 failed'
expect 0 '[0-9.]+ [1-9][0-9]*' '12.5 4 passed, 0 failed'
# failures stay failures, with or without a piece in front
expect 1 '' '38 passed, 1 failed'
expect 1 '' '38 passed, 10 failed'
expect 1 '' '[node0:31364] coll/dualrail: ran38 passed, 1 failed'
expect 1 '' '39 passed, 0 failed, then more'
expect 1 '' '39 passed, 0 failed[node0:31364] coll/dualrail: rank 0: ...'
expect 1 '' 'coll_check: MPI_COMM_WORLD: reductions 0.57 s'
expect 1 '' ''
expect 1 '[1-9][0-9]*' '0 passed, 0 failed'
if [ "$bad" -gt 0 ]; then
  echo "verdict_test.sh: FAIL: $bad case(s)"
  exit 1
fi
echo "verdict_test.sh: PASS"
