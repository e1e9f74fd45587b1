#!/usr/bin/env bash
# Allreduce on the lab, coll/dualrail against the stock paths a user would
# pick instead. 4 nodes, one rank each, every plane capped at 500 Mbit/s so
# that the planes, not the two-core machine, are the bottleneck.
#
#   perf/allreduce_compare.sh [--rate 500mbit] [--mtu 1500] [--sizes MIN:MAX] [--iters N]
#                             [--coll COLL[,COLL...]]
#
# --coll: allreduce (the default), bcast, reduce, allgather, allgatherv,
# reduce_scatter_block, reduce_scatter, gather, scatter or barrier, or a
# comma-separated list of them measured one after the other on the same lab
# (dualrail-coll-bench for all but allreduce; bus bandwidth in the nccl-tests
# convention: bcast and reduce algbw, the gathers and scatters algbw x (n-1)/n).
# With a list, a summary of every collective at the largest size follows the
# tables.
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
    -h|--help) sed -n '2,25p' "$0"; exit 0 ;;
    *) echo "allreduce_compare.sh: unknown option $1" >&2; exit 2 ;;
  esac
  shift
done
IFS=, read -r -a colls <<<"$coll"
[ "${#colls[@]}" -ge 1 ] || { echo "allreduce_compare.sh: --coll needs a collective" >&2; exit 2; }
for c in "${colls[@]}"; do
  case "$c" in
    allreduce|bcast|reduce|allgather|allgatherv|reduce_scatter_block|reduce_scatter|gather|scatter|barrier) ;;
    *) echo "allreduce_compare.sh: unknown collective '$c'" >&2; exit 2 ;;
  esac
done
# shellcheck source=contrib/lib/perf.sh
. "$root/contrib/lib/perf.sh" # perf_build
perf_build allreduce_compare.sh "$root" perf/dualrail-allreduce-bench perf/dualrail-coll-bench
export DUALRAIL_LAB_PREFIX=${DUALRAIL_LAB_PREFIX:-drperf} DUALRAIL_BUILD_DIR=$build
lab=$root/contrib/lab.sh
"$lab" up --nodes 4 --rate "$rate" --mtu "$mtu" >/dev/null
trap '"$lab" down >/dev/null 2>&1 || true' EXIT
work=$(mktemp -d /tmp/dualrail-compare-XXXXXX)
trap '"$lab" down >/dev/null 2>&1 || true; rm -rf "$work"' EXIT

run() { # collective, name, mpirun options...
  local c=$1 name=$2; shift 2
  local bench=$build/perf/dualrail-coll-bench args=(-m "$sizes" -C "$c")
  [ "$c" != allreduce ] || { bench=$build/perf/dualrail-allreduce-bench; args=(-m "$sizes"); }
  [ -z "$iters" ] || args+=(-i "$iters")
  echo "allreduce_compare.sh: $c: $name" >&2
  mkdir -p "$work/$c"
  if ! timeout 900 "$lab" mpirun -np 4 --map-by node "$@" "$bench" "${args[@]}" \
       >"$work/$c/$name.out" 2>"$work/$c/$name.err"; then
    echo "allreduce_compare.sh: $c: $name failed:" >&2
    tail -n 20 "$work/$c/$name.err" >&2
    exit 1
  fi
}
for c in "${colls[@]}"; do
  # Only the measured collective differs between the runs: the benchmark's barrier and
  # broadcast between calls stay with the previous component (unless one is measured).
  dr=(--mca coll_dualrail_priority 100)
  [ "$c" = barrier ] || dr+=(--mca coll_dualrail_barrier 0)
  [ "$c" = bcast ] || dr+=(--mca coll_dualrail_bcast 0)
  dr+=(--mca pml ob1 --mca btl tcp,self --mca btl_tcp_if_include ethA,ethB)
  run "$c" dualrail-1 "${dr[@]}" --mca coll_dualrail_planes ethA
  run "$c" dualrail-2 "${dr[@]}" --mca coll_dualrail_planes ethA,ethB
  run "$c" ob1-tcp --mca pml ob1 --mca btl tcp,self --mca btl_tcp_if_include ethA,ethB
  run "$c" ucx --mca pml ucx --mca pml_ucx_tls any --mca pml_ucx_devices any -x UCX_NET_DEVICES=ethA,ethB
done

PYTHONPATH="$root/contrib/lib" python3 - "$work" "$rate" "$mtu" "${colls[@]}" <<'PY'
import sys, os
import bench_table
work, rate, mtu, colls = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
names = ["dualrail-1", "dualrail-2", "ob1-tcp", "ucx"]
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
summary = []
for coll in colls:
    data = {n: bench_table.read(os.path.join(work, coll, n + ".out"), 2) for n in names}
    print(f"# {coll}, 4 ranks on 4 lab nodes, planes capped at {rate} each, MTU {mtu}")
    print("# bus bandwidth MB/s (latency us)")
    sizes = bench_table.print_rows(names, data)
    big = max(sizes)
    small = min(sizes)
    bw2 = data["dualrail-2"][big][1]
    best_stock_bw = max(data["ob1-tcp"][big][1], data["ucx"][big][1])
    lat2 = data["dualrail-2"][small][0]
    best_stock_lat = min(data["ob1-tcp"][small][0], data["ucx"][small][0])
    print()
    # dualrail-2 against the payload limit and the better stock path; none for barrier (no bytes)
    lim, stock = (bw2 / payload, bw2 / best_stock_bw) if best_stock_bw > 0 else (None, None)
    if lim is not None:
        print(f"at {big} B: dualrail-2 bus BW / sum of caps = {bw2 / cap:.2f}")
        print(f"target at {big} B: dualrail-2 bus BW / payload limit ({payload:.2f} MB/s) = "
              f"{lim:.2f} (>= 0.9 at MTU 1500, >= 0.93 at 9000)")
        print(f"target at {big} B: dualrail-2 bus BW / best stock = {stock:.2f} (>= 1.5)")
    print(f"target at {small} B: dualrail-2 latency / best stock = {lat2 / best_stock_lat:.2f} (<= 1.0; "
          "4 ranks on 2 cores, oversubscribed: perf/latency_compare.sh measures one rank per core)")
    summary.append((coll, big, [data[n][big][1] for n in names], lim, stock))
    if len(colls) > 1:
        print()
if len(colls) > 1:
    print(f"# every collective at its largest size: bus bandwidth MB/s; payload limit of the two "
          f"planes {payload:.2f} MB/s")
    print("%-22s%10s" % ("collective", "size") + "".join("%12s" % n for n in names) +
          "%12s%12s" % ("dr2/limit", "dr2/stock"))
    for coll, big, bws, lim, stock in summary:
        r = ("%12.2f%12.2f" % (lim, stock)) if lim is not None else "%12s%12s" % ("-", "-")
        print("%-22s%10d" % (coll, big) + "".join("%12.2f" % b for b in bws) + r)
PY
