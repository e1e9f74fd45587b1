#!/usr/bin/env bash
# Alltoall and the mixture-of-experts pattern on the lab, coll/dualrail against
# the stock paths a user would pick instead. 4 nodes, one rank each
# (--map-by node), every plane capped at 500 Mbit/s so that the planes, not the
# two-core machine, are the bottleneck; Open MPI's own point-to-point (pml
# ob1, btl tcp) on the plane interfaces in every run.
#
#   perf/alltoall_compare.sh [--rate 500mbit] [--mtu 1500] [--sizes MIN:MAX] [--iters N]
#                            [--tokens T] [--token-bytes B] [--layers L] [--seed S]
#                            [--only balanced|moe]
#
# Configurations (same benchmark binary, dualrail-alltoall-bench):
#   dualrail-1    coll/dualrail on plane A only
#   dualrail-2    coll/dualrail on planes A and B
#   ob1-tcp       pml ob1, btl tcp over both plane interfaces, coll tuned
#   ucx           pml ucx (pml_ucx_tls any, pml_ucx_devices any),
#                 UCX_NET_DEVICES=ethA,ethB, coll tuned
# Balanced: MPI_Alltoall bus bandwidth (algbw x (n-1)/n, MB/s) per size (bytes
# each rank sends in all). MoE: time per layer (counts by MPI_Alltoall,
# dispatch and combine by MPI_Alltoallv; Zipf 1.2 routing, seeded) and its
# ratio to the busiest node's bytes at the two planes' payload rate
# (2 x rate x (MTU - 52) / (MTU + 14): TCP/IP and Ethernet headers, as tc
# counts them). Then the targets of issue 14. Uses its own lab (prefix drperf
# unless DUALRAIL_LAB_PREFIX is set) and removes it at exit.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
rate=500mbit mtu=1500 sizes=1024:16777216 iters= tokens=1024 tbytes=8192 layers=10 seed=14 only=
while [ $# -gt 0 ]; do
  case "$1" in
    --rate) rate=${2:?}; shift ;;
    --mtu) mtu=${2:?}; shift ;;
    --sizes) sizes=${2:?}; shift ;;
    --iters) iters=${2:?}; shift ;;
    --tokens) tokens=${2:?}; shift ;;
    --token-bytes) tbytes=${2:?}; shift ;;
    --layers) layers=${2:?}; shift ;;
    --seed) seed=${2:?}; shift ;;
    --only) only=${2:?}; shift ;;
    -h|--help) sed -n '2,25p' "$0"; exit 0 ;;
    *) echo "alltoall_compare.sh: unknown option $1" >&2; exit 2 ;;
  esac
  shift
done
# shellcheck source=contrib/lib/perf.sh
. "$root/contrib/lib/perf.sh" # perf_build
perf_build alltoall_compare.sh "$root" perf/dualrail-alltoall-bench
bench=$build/perf/dualrail-alltoall-bench
export DUALRAIL_LAB_PREFIX=${DUALRAIL_LAB_PREFIX:-drperf} DUALRAIL_BUILD_DIR=$build
lab=$root/contrib/lab.sh
work=$(mktemp -d /tmp/dualrail-a2a-compare-XXXXXX)
trap '"$lab" down >/dev/null 2>&1 || true; rm -rf "$work"' EXIT
"$lab" up --nodes 4 --rate "$rate" --mtu "$mtu" >/dev/null
payload=$(python3 - "$rate" "$mtu" <<'PY'
import sys
r, mtu = sys.argv[1].lower(), int(sys.argv[2])
for suf, mul in (("gbit", 1e9), ("mbit", 1e6), ("kbit", 1e3), ("", 1)):
    if r.endswith(suf):
        bits = float(r[: len(r) - len(suf)] if suf else r) * mul
        break
print("%.3f" % (2 * bits / 8 / 1e6 * (mtu - 52) / (mtu + 14)))
PY
)

run() { # name, mode (balanced|moe), mpirun options...
  local name=$1 mode=$2 a=(); shift 2
  if [ "$mode" = balanced ]; then
    a=(-m "$sizes"); [ -z "$iters" ] || a+=(-i "$iters")
  else
    a=(--moe --tokens "$tokens" --token-bytes "$tbytes" --layers "$layers" --seed "$seed"
       --payload-mbs "$payload")
  fi
  echo "alltoall_compare.sh: $mode $name" >&2
  if ! timeout 900 "$lab" mpirun -np 4 --map-by node --mca btl_tcp_if_include ethA,ethB "$@" \
       "$bench" "${a[@]}" >"$work/$mode-$name.out" 2>"$work/$mode-$name.err"; then
    echo "alltoall_compare.sh: $mode $name failed:" >&2
    tail -n 20 "$work/$mode-$name.err" >&2
    exit 1
  fi
}
# Only the alltoall(v) differ between the runs: the benchmark's barrier, broadcast and
# reductions stay with the previous component.
dr=(--mca pml ob1 --mca btl tcp,self --mca coll_dualrail_priority 100 --mca coll_dualrail_barrier 0
    --mca coll_dualrail_bcast 0 --mca coll_dualrail_allgather 0)
for mode in balanced moe; do
  [ -z "$only" ] || [ "$only" = "$mode" ] || continue
  run dualrail-1 "$mode" "${dr[@]}" --mca coll_dualrail_planes ethA
  run dualrail-2 "$mode" "${dr[@]}" --mca coll_dualrail_planes ethA,ethB
  run ob1-tcp "$mode" --mca pml ob1 --mca btl tcp,self
  run ucx "$mode" --mca pml ucx --mca pml_ucx_tls any --mca pml_ucx_devices any \
    -x UCX_NET_DEVICES=ethA,ethB
done

PYTHONPATH="$root/contrib/lib" python3 - "$work" "$rate" "$mtu" "$payload" "$only" <<'PY'
import sys, os
import bench_table
work, rate, mtu, payload, only = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4]), sys.argv[5]
names = ["dualrail-1", "dualrail-2", "ob1-tcp", "ucx"]
def verdict(v, op, t):
    ok = v >= t if op == ">=" else v <= t
    return "met" if ok else "MISSED"
if only in ("", "balanced"):
    data = {n: bench_table.read(os.path.join(work, "balanced-" + n + ".out"), 3) for n in names}
    print(f"# alltoall, 4 ranks on 4 lab nodes, planes capped at {rate} each, MTU {mtu}")
    print(f"# bus bandwidth MB/s (latency us); size = bytes each rank sends; payload limit of "
          f"both planes {payload:.2f} MB/s")
    sizes = bench_table.print_rows(names, data)
    big = max(sizes)
    bw2, bw1 = data["dualrail-2"][big][1], data["dualrail-1"][big][1]
    stock = max(data["ob1-tcp"][big][1], data["ucx"][big][1])
    print()
    r = bw2 / payload
    print(f"target at {big} B: dualrail-2 bus BW / payload limit = {r:.2f} (>= 0.9) {verdict(r, '>=', 0.9)}")
    r = bw2 / bw1
    print(f"target at {big} B: dualrail-2 / dualrail-1 = {r:.2f} (>= 1.8) {verdict(r, '>=', 1.8)}")
    r = bw2 / stock
    print(f"target at {big} B: dualrail-2 / best stock = {r:.2f} (>= 1.5) {verdict(r, '>=', 1.5)}")
if only in ("", "moe"):
    print()
    moe = {}
    for n in names:
        for line in open(os.path.join(work, "moe-" + n + ".out")):
            if line.startswith("moe:"):
                f = line.split()
                moe[n] = (float(f[3]), float(f[8]), float(f[11]))
            elif line.startswith("# moe:") and n == "dualrail-2":
                print(line.rstrip())
    print("%-12s %14s %12s %8s" % ("config", "ms per layer", "bound ms", "ratio"))
    for n in names:
        t, b, r = moe[n]
        print("%-12s %14.1f %12.1f %8.2f" % (n, t, b, r))
    t2 = moe["dualrail-2"][0]
    stock = min(moe["ob1-tcp"][0], moe["ucx"][0])
    r = moe["dualrail-2"][2]
    print(f"target moe: dualrail-2 time / busiest-node bound = {r:.2f} (<= 1.25) {verdict(r, '<=', 1.25)}")
    r = stock / t2
    print(f"target moe: best stock time / dualrail-2 time = {r:.2f} (>= 1.5) {verdict(r, '>=', 1.5)}")
PY
