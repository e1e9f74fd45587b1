#!/usr/bin/env bash
# Where a back-to-back 8-byte exchange's time goes, layer by layer, against the best stock
# MPI path: the evidence for what issue 11's latency target can and cannot be met with.
#
#   perf/exchange_floor.sh [--rounds R] [--size BYTES] [--iters N] [--baseline-build DIR]
#
# 2 lab nodes x 1 process (one per core), planes not capped, MTU 1500, the same exchange
# (both ends post a receive, send SIZE bytes, default 8, and wait) N times back to back
# (default 20000), in each of:
#   ucp-tag      raw UCP, tag API, plane A (dualrail-ucp-exchange exchange): the floor
#   ucp-am       raw UCP, active messages as ucx_mr sends them (... am): the floor of
#                ucx_mr's present wire protocol
#   ucp-guarded  raw UCP, tag API, with the least per-message work a failover-capable
#                transport keeps (... guarded: retained copy, header, duplicate check,
#                acknowledgement, done ring, clock; see perf/ucp_exchange.c)
#   ucx-mr       ucx_mr alone, both planes (dualrail-mr-latency exchange)
#   mpi-ucx      MPI_Allreduce, pml ucx + coll tuned on both planes (the best stock path of
#                perf/latency_compare.sh), back to back (dualrail-allreduce-bench -r)
#   mpi-dualrail coll/dualrail on both planes with its defaults (latency_compare.sh's
#                dualrail-2a), back to back the same way
#   mpi-before   (with --baseline-build DIR) mpi-dualrail with the component of another
#                build tree, e.g. a worktree of an earlier commit
# Every configuration runs once per round, the rounds interleaved (every other one in reverse
# order, round_order); each cell is the median
# of R rounds (default 7) in us per exchange (the MPI rows: 1 / calls per second), with its
# ratio to mpi-ucx. Uses its own lab (prefix drfloor unless DUALRAIL_LAB_PREFIX is set),
# removed at exit. Needs root. Every process runs under `timeout`.
set -euo pipefail
export LC_ALL=C
root=$(cd "$(dirname "$0")/.." && pwd)
rounds=7 size=8 iters=20000 baseline=
while [ $# -gt 0 ]; do
  case "$1" in
    --rounds) rounds=${2:?}; shift ;;
    --size) size=${2:?}; shift ;;
    --iters) iters=${2:?}; shift ;;
    --baseline-build) baseline=${2:?}; shift ;;
    -h|--help) sed -n '2,27p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "exchange_floor.sh: unknown option $1" >&2; exit 1 ;;
  esac
  shift
done
[[ $rounds =~ ^[0-9]+$ && $rounds -ge 1 && $rounds -le 30 ]] || { echo "exchange_floor.sh: --rounds 1..30" >&2; exit 1; }
[[ $size =~ ^[0-9]+$ && $size -ge 4 && $size -le 16384 ]] || { echo "exchange_floor.sh: --size 4..16384 (MPI_FLOAT elements, a whole small message)" >&2; exit 1; }
[[ $iters =~ ^[0-9]+$ && $iters -ge 100 && $iters -le 200000 ]] || { echo "exchange_floor.sh: --iters 100..200000" >&2; exit 1; }
# shellcheck source=contrib/lib/perf.sh
. "$root/contrib/lib/perf.sh" # perf_build, mr_latency_lab, mr_latency_run
if [ -n "$baseline" ]; then
  DUALRAIL_BUILD_DIR=$baseline perf_build exchange_floor.sh "$root"
  baseline=$build
fi
perf_build exchange_floor.sh "$root" perf/dualrail-ucp-exchange perf/dualrail-mr-latency \
  perf/dualrail-allreduce-bench
export DUALRAIL_BUILD_DIR=$build
mr_latency_lab "$root" floor # lab, work; removed at exit
# shellcheck source=contrib/lib/latency.sh
. "$root/contrib/lib/latency.sh" # latency_opts

ucp() { # mode: us per exchange on plane A, empty on failure
  local dir peer
  dir=$(mktemp -d "$work/oob-XXXXXX")
  local x=(env UCX_TLS=tcp UCX_NET_DEVICES=ethA timeout 90 "$build/perf/dualrail-ucp-exchange" "$dir")
  "$lab" exec 1 "${x[@]}" 1 0 "$size" "$iters" "$1" >/dev/null 2>"$dir/peer.err" &
  peer=$!
  "$lab" exec 0 "${x[@]}" 0 1 "$size" "$iters" "$1" 2>"$dir/self.err" | awk '{print $2}'
  wait "$peer" || true
}
mpi() { # configuration of contrib/lib/latency.sh [component build]: us per back-to-back call
  local out
  # shellcheck disable=SC2046 # latency_opts is a word list by design
  out=$(DUALRAIL_BUILD_DIR=${2:-$build} timeout 300 "$lab" mpirun -np 2 --map-by node $(latency_opts "$1") \
    "$build/perf/dualrail-allreduce-bench" -m "$size:$size" -i "$iters" -T 20 -r 2>"$work/$1.err") || return 0
  echo "$out" | awk -v s="$size" '$1 == s && $2 > 0 {printf "%.3f\n", 1e6 / $2}'
}

names=(ucp-tag ucp-am ucp-guarded ucx-mr mpi-ucx mpi-dualrail)
[ -z "$baseline" ] || names+=(mpi-before)
declare -A got
for k in $(seq 1 "$rounds"); do
  for n in $(round_order "$k" "${names[@]}"); do
    echo "exchange_floor.sh: round $k: $n" >&2
    case $n in
      ucp-tag) v=$(ucp exchange) ;;
      ucp-am) v=$(ucp am) ;;
      ucp-guarded) v=$(ucp guarded) ;;
      ucx-mr) v=$(mr_latency_run "$build" "$size" "$iters" 0 adaptive adaptive) ;;
      mpi-ucx) v=$(mpi ucx) ;;
      mpi-dualrail) v=$(mpi dualrail-2a) ;;
      mpi-before) v=$(mpi dualrail-2a "$baseline") ;;
    esac
    [ -n "$v" ] || { echo "exchange_floor.sh: $n gave no figure (round $k)" >&2; exit 1; }
    got[$n]="${got[$n]:-} $v"
  done
done
median() { tr ' ' '\n' | grep . | sort -g | awk '{a[NR] = $1} END {print a[int((NR + 1) / 2)]}'; }
ref=$(echo "${got[mpi-ucx]}" | median)
printf '# %s-byte exchange back to back, 2 lab nodes x 1 process, us per exchange,\n' "$size"
printf '# median of %s interleaved rounds of %s; x ucx = against MPI_Allreduce on pml ucx\n' "$rounds" "$iters"
printf '%-14s %9s %8s   %s\n' configuration median "x ucx" rounds
for n in "${names[@]}"; do
  m=$(echo "${got[$n]}" | median)
  printf '%-14s %9.2f %8.3f  %s\n' "$n" "$m" "$(awk -v a="$m" -v b="$ref" 'BEGIN {print a / b}')" "${got[$n]}"
done
