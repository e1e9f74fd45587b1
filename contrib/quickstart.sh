#!/usr/bin/env bash
# DualRail quickstart: set-up, build, the dual-plane lab, the transfer benchmark
# (one plane vs two), a live fault on plane A mid-stream and its heal,
# MPI_Allreduce, then bcast, reduce, allgather and reduce_scatter_block at 16 MiB,
# through coll/dualrail against the stock Open MPI paths, the mixture-of-experts
# all-to-all pattern against them, and a live failover inside MPI_Allreduce with
# its bandwidth plot (quickstart_failover.png). Needs root (network namespaces):
# not root, it runs itself through sudo where sudo is installed. Takes about ten
# minutes.
#
#   ./contrib/quickstart.sh [--keep-lab] [--fault down|blackhole|reset]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=contrib/lib/root.sh
. "$root/contrib/lib/root.sh"
need_root_or_sudo quickstart.sh "$root/contrib/quickstart.sh" "$@"
cd "$root"
keep=0
fault=blackhole
while [ $# -gt 0 ]; do
  case "$1" in
    --keep-lab) keep=1 ;;
    --fault) fault=${2:?--fault needs a kind}; shift ;;
    -h|--help) sed -n '2,11p' "$0"; exit 0 ;;
    *) echo "quickstart.sh: unknown option $1" >&2; exit 2 ;;
  esac
  shift
done
case "$fault" in down|blackhole|reset) ;; *) echo "quickstart.sh: --fault takes down, blackhole or reset" >&2; exit 2 ;; esac

step() { printf '\n== %s\n' "$*"; }

step "1/9 set-up (Debian packages)"
./contrib/setup.sh
echo "all packages present"

step "2/9 build into build/"
cmake -S . -B build >/dev/null
cmake --build build -j"$(nproc)" >/dev/null
echo "built: build/ucx_mr/libdualrail_ucx_mr.so, benchmark, demo"

export DUALRAIL_LAB_PREFIX=${DUALRAIL_LAB_PREFIX:-drlab}
lab=./contrib/lab.sh
step "3/9 the lab: 2 nodes, planes A and B capped at 1 Gbit/s each"
$lab up --nodes 2 --rate 1gbit
[ "$keep" -eq 1 ] || trap '$lab down >/dev/null 2>&1 || true' EXIT
$lab status

step "4/9 transfer benchmark, node0 -> node1: one plane vs two"
./perf/transfer_bench.sh

step "5/9 live failover: plane A of node1 cut ($fault) mid-stream, then healed"
dir=$(mktemp -d /tmp/dualrail-quickstart-XXXXXX)
demo=build/contrib/demo/dualrail-failover-demo
timeout 150 $lab exec 1 "$root/$demo" server "$dir" ethA,ethB >"$dir/server.log" 2>&1 &
srv=$!
rc=0
timeout 150 $lab exec 0 "$root/$demo" client "$dir" ethA,ethB "$root/contrib/lab.sh" 1 "$fault" \
  2> >(grep --line-buffered "dualrail" >&2) || rc=$?
wait "$srv" || rc=$?
$lab fault 1 a heal >/dev/null 2>&1 || true
echo "receiver: $(tail -n 1 "$dir/server.log")"
rm -rf "$dir"
if [ "$rc" -ne 0 ]; then
  echo "quickstart.sh: the failover demo failed (exit $rc)" >&2
  exit "$rc"
fi
step "6/9 MPI_Allreduce on 4 nodes (planes at 500 Mbit/s, MTU 9000): coll/dualrail (one plane, two planes) against stock Open MPI"
# On a lab of its own (4 nodes, 500 Mbit/s planes), removed afterwards.
DUALRAIL_LAB_PREFIX=drperf ./perf/allreduce_compare.sh --iters 20 --mtu 9000

step "7/9 MPI_Bcast, MPI_Reduce, MPI_Allgather, MPI_Reduce_scatter_block at 16 MiB on 4 nodes: coll/dualrail against stock Open MPI"
# One size, one lab of its own; bus bandwidth in the nccl-tests convention, summary last.
DUALRAIL_LAB_PREFIX=drperf ./perf/allreduce_compare.sh --iters 5 --mtu 9000 --sizes 16777216:16777216 \
  --coll bcast,reduce,allgather,reduce_scatter_block

step "8/9 mixture-of-experts layers on 4 nodes (Zipf-routed MPI_Alltoallv dispatch and combine): coll/dualrail against stock Open MPI"
# The expert-parallel pattern: per-layer token counts by MPI_Alltoall, dispatch and combine by
# MPI_Alltoallv; time per layer against the busiest node's lower bound (lab of its own).
DUALRAIL_LAB_PREFIX=drperf ./perf/alltoall_compare.sh --only moe --layers 5 --mtu 9000

step "9/9 live failover inside MPI_Allreduce: plane A of node 1 black-holed at 5 s, healed at 12 s"
# 4 ranks, 16 MiB allreduces for 20 s on a lab of its own; prints every call, the plane
# transitions and the three failover targets; writes the plot next to this directory.
rc=0
DUALRAIL_LAB_PREFIX=drtimeline ./perf/failover_timeline.sh --out "$root/quickstart_failover" || rc=$?
case $rc in
  0) ;;
  3) echo "quickstart.sh: note: a failover target was missed in this run (a busy machine skews timings; see the summary above)" ;;
  *) echo "quickstart.sh: the failover timeline failed (exit $rc)" >&2; exit "$rc" ;;
esac
echo "plot: $root/quickstart_failover.png (calls: quickstart_failover.tsv, summary: quickstart_failover.txt)"

printf '\nDone. The lab is %s.\n' "$([ "$keep" -eq 1 ] && echo "still up ($lab status; $lab down)" || echo "removed")"
