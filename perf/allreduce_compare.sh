#!/usr/bin/env bash
# Allreduce on the lab, coll/dualrail against the stock paths a user would
# pick instead. 4 nodes, one rank each, every plane capped at 500 Mbit/s so
# that the planes, not the two-core machine, are the bottleneck.
#
#   perf/allreduce_compare.sh [--rate 500mbit] [--mtu 1500] [--sizes MIN:MAX] [--iters N]
#                             [--coll COLL]
#
# --coll: bcast, reduce, allgather, allgatherv, reduce_scatter_block,
# reduce_scatter, gather, scatter or barrier instead of allreduce
# (dualrail-coll-bench; bus bandwidth in the nccl-tests convention: bcast and
# reduce algbw, the gathers and scatters algbw x (n-1)/n).
#
# Configurations (same benchmark binary, OSU-style, MPI_FLOAT / MPI_SUM):
#   dualrail-1    coll/dualrail on plane A only
#   dualrail-2    coll/dualrail on planes A and B
#   (in these two, Open MPI's own point-to-point - the benchmark's barrier and
#   what the previous component does - is pml ob1 with btl tcp on the plane
#   interfaces too, as in ob1-tcp: nothing crosses the uncapped management
#   network in any run)
#   ob1-tcp       pml ob1, btl tcp over both plane interfaces, coll tuned
#   ucx           pml ucx (pml_ucx_tls any, pml_ucx_devices any),
#                 UCX_NET_DEVICES=ethA,ethB, coll tuned
# Prints one table of bus bandwidth (MB/s) and latency (us) per size, then the
# target ratios at 16 MiB and 8 B. Uses its own lab (prefix drperf unless
# DUALRAIL_LAB_PREFIX is set) and removes it at exit if it made it.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
rate=500mbit mtu=1500 sizes=8:16777216 iters= coll=allreduce
while [ $# -gt 0 ]; do
  case "$1" in
    --rate) rate=${2:?}; shift ;;
    --mtu) mtu=${2:?}; shift ;;
    --sizes) sizes=${2:?}; shift ;;
    --iters) iters=${2:?}; shift ;;
    --coll) coll=${2:?}; shift ;;
    -h|--help) sed -n '2,22p' "$0"; exit 0 ;;
    *) echo "allreduce_compare.sh: unknown option $1" >&2; exit 2 ;;
  esac
  shift
done
# shellcheck source=contrib/lib/perf.sh
. "$root/contrib/lib/perf.sh" # perf_build
if [ "$coll" = allreduce ]; then
  perf_build allreduce_compare.sh "$root" perf/dualrail-allreduce-bench
  bench=$build/perf/dualrail-allreduce-bench
else
  perf_build allreduce_compare.sh "$root" perf/dualrail-coll-bench
  bench=$build/perf/dualrail-coll-bench
fi
export DUALRAIL_LAB_PREFIX=${DUALRAIL_LAB_PREFIX:-drperf} DUALRAIL_BUILD_DIR=$build
lab=$root/contrib/lab.sh
"$lab" up --nodes 4 --rate "$rate" --mtu "$mtu" >/dev/null
trap '"$lab" down >/dev/null 2>&1 || true' EXIT
work=$(mktemp -d /tmp/dualrail-compare-XXXXXX)
trap '"$lab" down >/dev/null 2>&1 || true; rm -rf "$work"' EXIT

args=(-m "$sizes")
[ "$coll" = allreduce ] || args+=(-C "$coll")
[ -z "$iters" ] || args+=(-i "$iters")
run() { # name, mpirun options...
  local name=$1; shift
  echo "allreduce_compare.sh: $name" >&2
  if ! timeout 900 "$lab" mpirun -np 4 --map-by node "$@" "$bench" "${args[@]}" \
       >"$work/$name.out" 2>"$work/$name.err"; then
    echo "allreduce_compare.sh: $name failed:" >&2
    tail -n 20 "$work/$name.err" >&2
    exit 1
  fi
}
# Only the measured collective differs between the runs: the benchmark's barrier and
# broadcast between calls stay with the previous component (unless one is measured).
dr=(--mca coll_dualrail_priority 100)
[ "$coll" = barrier ] || dr+=(--mca coll_dualrail_barrier 0)
[ "$coll" = bcast ] || dr+=(--mca coll_dualrail_bcast 0)
dr+=(--mca pml ob1 --mca btl tcp,self --mca btl_tcp_if_include ethA,ethB)
run dualrail-1 "${dr[@]}" --mca coll_dualrail_planes ethA
run dualrail-2 "${dr[@]}" --mca coll_dualrail_planes ethA,ethB
run ob1-tcp --mca pml ob1 --mca btl tcp,self --mca btl_tcp_if_include ethA,ethB
run ucx --mca pml ucx --mca pml_ucx_tls any --mca pml_ucx_devices any -x UCX_NET_DEVICES=ethA,ethB

python3 - "$work" "$rate" "$mtu" "$coll" <<'PY'
import sys, os
work, rate, mtu, coll = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4]
names = ["dualrail-1", "dualrail-2", "ob1-tcp", "ucx"]
data = {}
for n in names:
    rows = {}
    for line in open(os.path.join(work, n + ".out")):
        if line.startswith("#") or not line.strip():
            continue
        f = line.split()
        rows[int(f[0])] = (float(f[1]), float(f[2]))
    data[n] = rows
sizes = sorted(data["dualrail-2"])
print(f"# {coll}, 4 ranks on 4 lab nodes, planes capped at {rate} each, MTU {mtu}")
print("# bus bandwidth MB/s (latency us)")
print("%-10s" % "size" + "".join("%22s" % n for n in names))
for s in sizes:
    cells = []
    for n in names:
        lat, bw = data[n].get(s, (float("nan"), float("nan")))
        cells.append("%22s" % ("%.2f (%.0f)" % (bw, lat)))
    print("%-10d" % s + "".join(cells))
def mbit(r):
    r = r.lower()
    for suf, mul in (("gbit", 1e9), ("mbit", 1e6), ("kbit", 1e3)):
        if r.endswith(suf):
            return float(r[: -len(suf)]) * mul
    return float(r)
cap = 2 * mbit(rate) / 8 / 1e6  # both planes, MB/s
# What TCP can carry through the caps: tc counts Ethernet frames (MTU + 14 bytes), of
# which MTU - 52 are payload (IPv4, TCP with timestamps).
payload = cap * (float(mtu) - 52) / (float(mtu) + 14)
big = max(sizes)
small = min(sizes)
bw2 = data["dualrail-2"][big][1]
best_stock_bw = max(data["ob1-tcp"][big][1], data["ucx"][big][1])
lat2 = data["dualrail-2"][small][0]
best_stock_lat = min(data["ob1-tcp"][small][0], data["ucx"][small][0])
print()
if best_stock_bw > 0:  # not for barrier (no bytes)
    print(f"at {big} B: dualrail-2 bus BW / sum of caps = {bw2 / cap:.2f}")
    print(f"target at {big} B: dualrail-2 bus BW / payload limit ({payload:.2f} MB/s) = "
          f"{bw2 / payload:.2f} (>= 0.9 at MTU 1500, >= 0.93 at 9000)")
    print(f"target at {big} B: dualrail-2 bus BW / best stock = {bw2 / best_stock_bw:.2f} (>= 1.5)")
print(f"target at {small} B: dualrail-2 latency / best stock = {lat2 / best_stock_lat:.2f} (<= 1.0; "
      "4 ranks on 2 cores, oversubscribed: perf/latency_compare.sh measures one rank per core)")
PY
