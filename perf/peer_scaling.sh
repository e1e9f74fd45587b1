#!/usr/bin/env bash
# What the peers a process registers but does not talk to cost its small messages.
#
#   perf/peer_scaling.sh [--idle LIST] [--rounds R] [--size BYTES] [--iters N]
#                        [--baseline-build DIR]
#
# An MPI job registers every rank of MPI_COMM_WORLD with ucx_mr (coll/dualrail's module
# set-up) and exchanges with a few of them at a time. The lab has a few nodes, not
# thousands, so this stands in for a large job with dualrail-mr-latency's IDLE_PEERS: the
# process on node 0 registers that many more peers (its own address under other ids, never
# connected), then runs the 8-byte exchange of a 2-rank allreduce with node 1 (ucx_mr alone,
# no MPI, both planes, 2 lab nodes x 1 process, planes not capped). For each count in LIST
# (default 0,256,1024,4096) the median of R interleaved rounds (default 3) of N iterations
# (default 20000), in us per exchange, and its ratio to the count 0 of the same build; with
# --baseline-build DIR the same from another build tree (a worktree of an earlier commit:
# "before"). Uses its own lab (prefix drpeers unless DUALRAIL_LAB_PREFIX is set), removed at
# exit. Needs root. Every process runs under `timeout`.
set -euo pipefail
export LC_ALL=C
root=$(cd "$(dirname "$0")/.." && pwd)
idle=0,256,1024,4096 rounds=3 size=8 iters=20000 baseline=
while [ $# -gt 0 ]; do
  case "$1" in
    --idle) idle=${2:?}; shift ;;
    --rounds) rounds=${2:?}; shift ;;
    --size) size=${2:?}; shift ;;
    --iters) iters=${2:?}; shift ;;
    --baseline-build) baseline=${2:?}; shift ;;
    -h|--help) sed -n '2,18p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "peer_scaling.sh: unknown option $1" >&2; exit 1 ;;
  esac
  shift
done
[[ $idle =~ ^[0-9]+(,[0-9]+)*$ ]] || { echo "peer_scaling.sh: --idle N,N,..." >&2; exit 1; }
for n in ${idle//,/ }; do
  [ "$n" -le 65536 ] || { echo "peer_scaling.sh: at most 65536 idle peers" >&2; exit 1; }
done
[[ $rounds =~ ^[0-9]+$ && $rounds -ge 1 && $rounds -le 20 ]] || { echo "peer_scaling.sh: --rounds 1..20" >&2; exit 1; }
[[ $size =~ ^[0-9]+$ && $size -ge 1 && $size -le 65536 ]] || { echo "peer_scaling.sh: --size 1..65536" >&2; exit 1; }
[[ $iters =~ ^[0-9]+$ && $iters -ge 100 && $iters -le 1000000 ]] || { echo "peer_scaling.sh: --iters 100..1000000" >&2; exit 1; }
# shellcheck source=contrib/lib/perf.sh
. "$root/contrib/lib/perf.sh" # mr_latency_builds, mr_latency_lab, mr_latency_run
mr_latency_builds peer_scaling.sh "$root" "$baseline"
mr_latency_lab "$root" peers

declare -A got
for _ in $(seq "$rounds"); do
  for b in "${!builds[@]}"; do
    for n in ${idle//,/ }; do
      v=$(mr_latency_run "${builds[$b]}" "$size" "$iters" "$n" adaptive adaptive)
      [ -n "$v" ] || { echo "peer_scaling.sh: build ${builds[$b]}, $n idle peers: no result" >&2; exit 1; }
      got[$b.$n]="${got[$b.$n]:-} $v"
    done
  done
done
median() { tr ' ' '\n' | grep . | sort -g | awk '{a[NR] = $1} END {print a[int((NR + 1) / 2)]}'; }
first=${idle%%,*}
printf '%s-byte exchange, ucx_mr alone, 2 lab nodes x 1 process, both planes; us, median of %s rounds\n' "$size" "$rounds"
head="idle peers    this build  x $first"
[ -z "$baseline" ] || head="$head      before  x $first  before/this"
echo "$head"

for n in ${idle//,/ }; do
  line=""
  for b in "${!builds[@]}"; do
    m=$(echo "${got[$b.$n]}" | median)
    z=$(echo "${got[$b.$first]}" | median)
    line="$line $(awk -v m="$m" -v z="$z" 'BEGIN { printf "%11.2f %10.2f", m, m / z }')"
    [ "$b" -eq 0 ] && this=$m
  done
  [ -z "$baseline" ] || line="$line $(awk -v a="$(echo "${got[1.$n]}" | median)" -v t="$this" 'BEGIN { printf "%12.2f", a / t }')"
  printf '%-10s%s\n' "$n" "$line"
done
