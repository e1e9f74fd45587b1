#!/usr/bin/env bash
# Small-message latency of every collective coll/dualrail serves (issue 13's
# "at 8 B every collective and barrier <= 1.0 x the better stock path"),
# measured as clusters run: one rank per lab node (--map-by node), 2 nodes by
# default (no more ranks than this 2-core machine has cores; --nodes 4
# oversubscribes it, as README explains), planes not capped.
#
#   perf/coll_latency.sh [--nodes 2] [--size 8] [--rounds 3] [--iters 2000]
#                        [--colls LIST] [--baseline-build DIR]
#
# Configurations (the same benchmark binary, dualrail-coll-bench -C COLL -m S:S):
#   dualrail-2   coll/dualrail on planes A and B (the benchmark's barrier and
#                stop-flag broadcast go to the previous component unless they
#                are the measured collective, as in perf/allreduce_compare.sh)
#   dualrail-2u  dualrail-2 beside pml ucx instead of ob1 (the ucx run's
#                point-to-point, so its barrier and broadcast are the ucx run's:
#                the barrier before each timed call decides when each rank starts
#                it, see contrib/lib/latency.sh)
#   ob1-tcp      pml ob1, btl tcp over both plane interfaces, coll tuned
#   ucx          pml ucx, UCX_NET_DEVICES=ethA,ethB, coll tuned
#   before       (with --baseline-build DIR) dualrail-2u with the component and
#                ucx_mr of another build tree, e.g. a worktree of an earlier
#                commit; its ratio dr2u/before is printed too
# In every run Open MPI's own point-to-point is on the plane interfaces (the
# dualrail runs: pml ob1, btl tcp on ethA,ethB), so the runs differ in the
# measured collective only. Sizes are nccl-tests sizes (dualrail-coll-bench
# -m): the whole message of bcast, reduce and allreduce, the whole result of
# allgather(v) and gather, the whole input of the reduce-scatters and scatter;
# those six get at least one float per rank (16 B on 4 nodes: 8 B would be
# count 0, a call that moves nothing).
# Every configuration runs --rounds times, interleaved (every other round in
# reverse order, round_order); each cell is the median.
# Prints the table and, per collective, the better dualrail run / the better
# stock path.
# Exit status 0 every ratio <= 1.0, 3 one is above, 1 a run failed. Uses its
# own lab (prefix drlatency unless DUALRAIL_LAB_PREFIX is set), removed at
# exit. Needs root.
set -euo pipefail
export LC_ALL=C
root=$(cd "$(dirname "$0")/.." && pwd)
nodes=2 size=8 rounds=3 iters=2000 baseline=
colls=allreduce,bcast,reduce,allgather,allgatherv,reduce_scatter_block,reduce_scatter,gather,scatter,barrier
while [ $# -gt 0 ]; do
  case "$1" in
    --nodes) nodes=${2:?}; shift ;;
    --size) size=${2:?}; shift ;;
    --rounds) rounds=${2:?}; shift ;;
    --iters) iters=${2:?}; shift ;;
    --colls) colls=${2:?}; shift ;;
    --baseline-build) baseline=${2:?}; shift ;;
    -h|--help) sed -n '2,37p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "coll_latency.sh: unknown option $1" >&2; exit 1 ;;
  esac
  shift
done
[[ $nodes =~ ^[0-9]+$ && $nodes -ge 2 && $nodes -le 16 ]] || { echo "coll_latency.sh: --nodes 2..16" >&2; exit 1; }
[[ $rounds =~ ^[0-9]+$ && $rounds -ge 1 && $rounds -le 20 ]] || { echo "coll_latency.sh: --rounds 1..20" >&2; exit 1; }
[[ $iters =~ ^[0-9]+$ && $iters -ge 1 && $iters -le 1000000 ]] || { echo "coll_latency.sh: --iters 1..1000000" >&2; exit 1; }
[[ $size =~ ^[0-9]+$ && $size -ge 4 ]] || { echo "coll_latency.sh: --size >= 4 (bytes)" >&2; exit 1; }
# shellcheck source=contrib/lib/perf.sh
. "$root/contrib/lib/perf.sh" # perf_build
if [ -n "$baseline" ]; then
  DUALRAIL_BUILD_DIR=$baseline perf_build coll_latency.sh "$root"
  baseline=$build
fi
perf_build coll_latency.sh "$root" perf/dualrail-coll-bench
export DUALRAIL_LAB_PREFIX=${DUALRAIL_LAB_PREFIX:-drlatency} DUALRAIL_BUILD_DIR=$build
lab=$root/contrib/lab.sh
work=$(mktemp -d /tmp/dualrail-coll-latency-XXXXXX)
trap '"$lab" down >/dev/null 2>&1 || true; rm -rf "$work"' EXIT
"$lab" up --nodes "$nodes" >/dev/null

p2p=(--mca pml ob1 --mca btl tcp,self --mca btl_tcp_if_include ethA,ethB)
ucx=(--mca pml ucx --mca pml_ucx_tls any --mca pml_ucx_devices any -x UCX_NET_DEVICES=ethA,ethB)
names=(dualrail-2 dualrail-2u ob1-tcp ucx)
[ -z "$baseline" ] || names+=(before)
opts() { # configuration, collective: the mpirun options
  case "$1" in
    dualrail-2*|before)
      local o=(--mca coll_dualrail_priority 100 --mca coll_dualrail_planes ethA,ethB)
      if [ "$1" = dualrail-2 ]; then o+=("${p2p[@]}"); else o+=("${ucx[@]}"); fi
      [ "$2" = barrier ] || o+=(--mca coll_dualrail_barrier 0)
      [ "$2" = bcast ] || o+=(--mca coll_dualrail_bcast 0)
      echo "${o[*]}" ;;
    ob1-tcp) echo "${p2p[*]}" ;;
    ucx) echo "${ucx[*]}" ;;
  esac
}
IFS=, read -r -a list <<<"$colls"
# The collectives that split the message into one block per rank need at least one float
# (4 bytes) per rank, or each rank calls with count 0 and the run times a no-op: on more
# than 2 nodes their size is raised to one float per rank (coll_size).
coll_size() {
  case "$1" in
    allgather|allgatherv|reduce_scatter_block|reduce_scatter|gather|scatter)
      echo $((size > 4 * nodes ? size : 4 * nodes)) ;;
    *) echo "$size" ;;
  esac
}
for k in $(seq 1 "$rounds"); do
  for c in "${list[@]}"; do
    for n in $(round_order "$k" "${names[@]}"); do
      echo "coll_latency.sh: round $k: $c: $n" >&2
      # shellcheck disable=SC2046 # opts is a word list by design
      b=$build
      [ "$n" != before ] || b=$baseline
      if ! DUALRAIL_BUILD_DIR=$b timeout 300 "$lab" mpirun -np "$nodes" --map-by node $(opts "$n" "$c") \
           "$build/perf/dualrail-coll-bench" -C "$c" -m "$(coll_size "$c"):$(coll_size "$c")" -i "$iters" -x 100 -T 60 \
           >"$work/$c.$n.$k" 2>"$work/$c.$n.$k.err"; then
        echo "coll_latency.sh: $c on $n failed:" >&2
        tail -n 20 "$work/$c.$n.$k.err" >&2
        exit 1
      fi
    done
  done
done

python3 - "$work" "$nodes" "$rounds" "$size" "$colls" "$(coll_size gather)" "${names[@]}" <<'PY'
import os, statistics, sys
work, nodes, rounds, size, colls = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), sys.argv[5].split(",")
block_size = int(sys.argv[6])
names = sys.argv[7:]
def lat(path):
    for line in open(path):
        f = line.split()
        if f and not line.startswith("#"):
            return float(f[1])
    raise SystemExit(f"coll_latency.sh: no result in {path}")
print(f"# {size}-byte latency, {nodes} ranks on {nodes} lab nodes (one each), planes not capped;")
print(f"# median of {rounds} interleaved rounds, microseconds (dualrail-coll-bench, max over ranks of the average)")
if block_size != size:
    print(f"# allgather(v), the reduce-scatters, gather and scatter at {block_size} B: one float per rank")
before = "before" in names
print("%-22s" % "collective" + "".join("%12s" % n for n in names) + "%11s" % "dr/stock" +
      ("%12s" % "dr2u/before" if before else ""))
missed = []
for c in colls:
    med = {n: statistics.median(lat(os.path.join(work, f"{c}.{n}.{k}")) for k in range(1, rounds + 1))
           for n in names}
    r = min(med["dualrail-2"], med["dualrail-2u"]) / min(med["ob1-tcp"], med["ucx"])
    print("%-22s" % c + "".join("%12.2f" % med[n] for n in names) + "%11.2f" % r +
          ("%12.3f" % (med["dualrail-2u"] / med["before"]) if before else ""))
    if r > 1.0:
        missed.append(f"{c}: {r:.2f} x the better stock path")
print()
print(f"target: every collective at {size} B <= 1.0 x the better stock path: {'met' if not missed else 'MISSED'}")
for m in missed:
    print("missed:", m)
sys.exit(3 if missed else 0)
PY
