#!/usr/bin/env bash
# The benchmark's sizes: dualrail-coll-bench on 4 lab nodes through coll/dualrail, -c
# validating every result, for the six collectives that give each rank a block of size / n.
# A size that leaves a block of no element (8 B on 4 ranks: 2 bytes, count 0) must be skipped
# with a note, not timed as a call that moves nothing; the sizes with a block are measured
# and pass validation. With -p (reduce_scatter_block here) every timed call's time is printed
# too, one line per call and size.
#   run_coll_bench.sh BENCH
set -euo pipefail
bench=$1
root=$(cd "$(dirname "$0")/../.." && pwd)
out=$(mktemp)
trap 'rm -f "$out"' EXIT
fail() { echo "run_coll_bench.sh: $*"; cat "$out"; echo "0 passed, 1 failed"; exit 1; }
for c in allgather allgatherv reduce_scatter_block reduce_scatter gather scatter; do
  each=()
  [[ $c == reduce_scatter_block ]] && each=(-p)
  timeout 120 "$root/contrib/lab.sh" mpirun -np 4 --map-by node --mca coll_dualrail_priority 100 \
    "$bench" -C "$c" -m 8:32 -i 4 -x 1 -c "${each[@]}" >"$out" 2>&1 || fail "$c: the benchmark exited $?"
  grep -q "^# 8 B skipped: $c on 4 ranks needs at least 16 B" "$out" || fail "$c: 8 B not skipped"
  ! grep -Eq "^8 " "$out" || fail "$c: 8 B timed with blocks of no element"
  for s in 16 32; do
    grep -Eq "^$s +[0-9.]+ +[0-9.]+ +Pass$" "$out" || fail "$c: $s B not measured and validated"
    if ((${#each[@]})); then
      [[ $(grep -Ec "^# $s B call [0-3]: [0-9.]+ us$" "$out") == 4 ]] ||
        fail "$c: -p did not print the 4 calls at $s B"
    fi
  done
  echo "ok: $c"
done
echo "6 passed, 0 failed"
