#!/usr/bin/env bash
# Small-message exchange latency when the two ends' weights pick different planes.
#
#   perf/small_plane.sh [--rounds R] [--size BYTES] [--iters N] [--baseline-build DIR]
#
# Each end of a pair picks its small-message plane from its own weights toward the other,
# and those differ by direction (learned from each side's own sends, or fixed per side).
# Runs the 8-byte exchange of a 2-rank allreduce (dualrail-mr-latency, ucx_mr alone, no
# MPI, both planes, 2 lab nodes x 1 process, planes not capped) in two set-ups:
#   agree     both ends with equal weights (both pick plane A)
#   disagree  node 0 with fixed weights 1:3 (its own pick: plane B), node 1 with 3:1
#             (its own pick: plane A); since the higher id follows the other's plane
#             (ucx_mr/mr_xfer.cc, small_plane) both send on B
# For each, the median of R interleaved rounds (default 5) of N iterations (default
# 20000), in us per exchange; with --baseline-build DIR the same from another build tree
# (a worktree of an earlier commit: "before"; its dualrail-mr-latency must take the
# WEIGHTS argument). Uses its own lab (prefix drsmall unless DUALRAIL_LAB_PREFIX is set),
# removed at exit. Needs root. Every process runs under `timeout`.
set -euo pipefail
export LC_ALL=C
root=$(cd "$(dirname "$0")/.." && pwd)
rounds=5 size=8 iters=20000 baseline=
while [ $# -gt 0 ]; do
  case "$1" in
    --rounds) rounds=${2:?}; shift ;;
    --size) size=${2:?}; shift ;;
    --iters) iters=${2:?}; shift ;;
    --baseline-build) baseline=${2:?}; shift ;;
    -h|--help) sed -n '2,19p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "small_plane.sh: unknown option $1" >&2; exit 1 ;;
  esac
  shift
done
[[ $rounds =~ ^[0-9]+$ && $rounds -ge 1 && $rounds -le 20 ]] || { echo "small_plane.sh: --rounds 1..20" >&2; exit 1; }
[[ $size =~ ^[0-9]+$ && $size -ge 1 && $size -le 16384 ]] || { echo "small_plane.sh: --size 1..16384 (a whole small message)" >&2; exit 1; }
[[ $iters =~ ^[0-9]+$ && $iters -ge 100 && $iters -le 1000000 ]] || { echo "small_plane.sh: --iters 100..1000000" >&2; exit 1; }
# shellcheck source=contrib/lib/perf.sh
. "$root/contrib/lib/perf.sh" # mr_latency_builds, mr_latency_lab, mr_latency_run
mr_latency_builds small_plane.sh "$root" "$baseline"
mr_latency_lab "$root" small

setups=(agree disagree)
declare -A weights=([agree]="equal equal" [disagree]="1:3 3:1") got
for _ in $(seq "$rounds"); do
  for b in "${!builds[@]}"; do
    for s in "${setups[@]}"; do
      # shellcheck disable=SC2086 # the two weights, one word each
      v=$(mr_latency_run "${builds[$b]}" "$size" "$iters" 0 ${weights[$s]})
      [ -n "$v" ] || { echo "small_plane.sh: build ${builds[$b]}, $s: no result" >&2; exit 1; }
      got[$b.$s]="${got[$b.$s]:-} $v"
    done
  done
done
median() { tr ' ' '\n' | grep . | sort -g | awk '{a[NR] = $1} END {print a[int((NR + 1) / 2)]}'; }
printf '%s-byte exchange, ucx_mr alone, 2 lab nodes x 1 process, both planes; us, median of %s rounds\n' "$size" "$rounds"
head="setup        this build  x agree"
[ -z "$baseline" ] || head="$head      before  x agree"
echo "$head"
for s in "${setups[@]}"; do
  line=""
  for b in "${!builds[@]}"; do
    m=$(echo "${got[$b.$s]}" | median)
    z=$(echo "${got[$b.agree]}" | median)
    line="$line $(awk -v m="$m" -v z="$z" 'BEGIN { printf "%11.2f %9.2f", m, m / z }')"
  done
  printf '%-10s%s\n' "$s" "$line"
done
