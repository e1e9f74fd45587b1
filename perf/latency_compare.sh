#!/usr/bin/env bash
# Small-message latency and message rate of MPI_Allreduce on the lab:
# coll/dualrail against the stock paths and against UCX's own floor, measured as
# clusters run: one rank per lab node (--map-by node), no more ranks than cores
# (2 nodes x 1 rank on this 2-core machine; --nodes 4 oversubscribes it, see
# README), planes not capped (latency, not bandwidth).
#
#   perf/latency_compare.sh [--nodes 2] [--sizes 8:4194304] [--iters N] [--rounds 3]
#                           [--rate-iters 50000] [--baseline-build DIR] [--rate R]
#
# Configurations (same OSU-style benchmark binary, MPI_FLOAT / MPI_SUM):
#   dualrail-1   coll/dualrail on plane A only (its allreduce only: the benchmark's
#                barrier and broadcast go to the previous component in every run,
#                over the ob1-tcp run's point-to-point on both planes)
#   dualrail-2   coll/dualrail on planes A and B
#   dualrail-2u  the same beside pml ucx (UCX_NET_DEVICES=ethA,ethB): the benchmark's
#                barrier and broadcast on the ucx run's point-to-point, as on a cluster
#                whose MPI runs pml ucx. The barrier before each timed call decides when
#                each rank starts it, and the rank that starts its send second pays for
#                both in the kernel (its sendmsg also delivers the first one's data, about
#                6 us more on the lab), so each dualrail run is paired with the stock run
#                whose barrier it shares (dr2/ob1, dr2u/ucx); the targets take the better
#                of the two dualrail runs against the better stock path
#   dualrail-2a  dualrail-2u with the component's defaults: the benchmark's barrier and
#                broadcast on coll/dualrail too (every collective on the component, as a
#                site that selects it runs); shown beside ucx (dr2a/ucx), left out of the
#                targets (its barrier is not a stock run's)
#   ob1-tcp      pml ob1, btl tcp over both plane interfaces, coll tuned
#   ucx          pml ucx, UCX_NET_DEVICES=ethA,ethB, coll tuned
#   before       (with --baseline-build DIR) dualrail-2 from another build tree,
#                e.g. a worktree of an earlier commit: "today" for a change
#   floor-c      (2 nodes) the ucx run with perf/floor_coll.c preloaded: each timed call a
#                bare UCP tag exchange on a worker and connection of its own on plane A plus
#                the reduction, nothing else: the collective's floor in the position every
#                dualrail run has (its own transport, entered right after the stock
#                barrier), where floor-x is the exchange back to back outside MPI. dr/fl-c is
#                what the component's own work costs; fl-c/stock what the position costs
#                (up to 64 KiB; larger calls go to the ucx run's path)
# UCX floor: `ucx_perftest -t tag_lat` over TCP on plane A between node 0 and
# node 1, one-way latency per size. A 2-rank allreduce of up to
# coll_dualrail_allreduce_rd_max_bytes is one exchange (recursive doubling, one
# round), so its floor is that one-way latency; on 4 nodes it is two rounds. And the
# floor of that exchange itself, floor-x: raw UCP between the same two nodes on plane A,
# both ends sending at once (dualrail-ucp-exchange), the kernel's send path on both.
#
# The machine is shared and noisy: every configuration runs --rounds times,
# interleaved (round 1 of each, then round 2 ..., every other round in reverse order:
# contrib/lib/perf.sh, round_order), and each cell is the median.
# Message rate: --rate-iters back-to-back 8-byte allreduces after one barrier
# (dualrail-allreduce-bench -r), calls per second of the slowest rank, median of
# the rounds. Prints one table of latencies (us), the ratios and the targets
# (sizes <= 2 KiB: the better dualrail-2 run <= 1.0 x the best stock path and <= 1.6 x the
# floor, judged against both floors; 8-byte rate >= the best stock path's; with a baseline, no size above
# 2 KiB more than 3 % slower than it). Exit status 0 met, 3 a target missed,
# 1 the run failed. Uses its own lab (prefix drlatency unless
# DUALRAIL_LAB_PREFIX is set) and removes it at exit. Needs root.
set -euo pipefail
export LC_ALL=C
root=$(cd "$(dirname "$0")/.." && pwd)
nodes=2 sizes=8:4194304 iters= rounds=3 rate_iters=50000 baseline= rate=
while [ $# -gt 0 ]; do
  case "$1" in
    --nodes) nodes=${2:?}; shift ;;
    --sizes) sizes=${2:?}; shift ;;
    --iters) iters=${2:?}; shift ;;
    --rounds) rounds=${2:?}; shift ;;
    --rate-iters) rate_iters=${2:?}; shift ;;
    --baseline-build) baseline=${2:?}; shift ;;
    --rate) rate=${2:?}; shift ;;
    -h|--help) sed -n '2,56p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "latency_compare.sh: unknown option $1" >&2; exit 1 ;;
  esac
  shift
done
[[ $nodes =~ ^[0-9]+$ && $nodes -ge 2 && $nodes -le 16 ]] || { echo "latency_compare.sh: --nodes 2..16" >&2; exit 1; }
[[ $rounds =~ ^[0-9]+$ && $rounds -ge 1 && $rounds -le 20 ]] || { echo "latency_compare.sh: --rounds 1..20" >&2; exit 1; }
[[ $sizes =~ ^[0-9]+:[0-9]+$ ]] || { echo "latency_compare.sh: --sizes MIN:MAX" >&2; exit 1; }
command -v ucx_perftest >/dev/null || { echo "latency_compare.sh: ucx_perftest missing (apt-get install ucx-utils)" >&2; exit 1; }
# shellcheck source=contrib/lib/perf.sh
. "$root/contrib/lib/perf.sh" # perf_build
if [ -n "$baseline" ]; then
  DUALRAIL_BUILD_DIR=$baseline perf_build latency_compare.sh "$root"
  baseline=$build
fi
perf_build latency_compare.sh "$root" perf/dualrail-allreduce-bench perf/dualrail-ucp-exchange \
  perf/libdualrail_floor_coll.so
export DUALRAIL_LAB_PREFIX=${DUALRAIL_LAB_PREFIX:-drlatency} DUALRAIL_BUILD_DIR=$build
lab=$root/contrib/lab.sh
work=$(mktemp -d /tmp/dualrail-latency-XXXXXX)
trap '"$lab" down >/dev/null 2>&1 || true; rm -rf "$work"' EXIT
up=(up --nodes "$nodes")
[ -z "$rate" ] || up+=(--rate "$rate")
"$lab" "${up[@]}" >/dev/null

bench_args=(-m "$sizes")
[ -z "$iters" ] || bench_args+=(-i "$iters")
. "$root/contrib/lib/latency.sh" # latency_opts: the configurations' mpirun options
names=(dualrail-1 dualrail-2 dualrail-2u dualrail-2a ob1-tcp ucx)
[ "$nodes" != 2 ] || names+=(floor-c) # its exchange is the 2-rank allreduce's
[ -z "$baseline" ] || names+=(before)
run() { # name, round, what (lat|rate)
  local name=$1 k=$2 what=$3 b=$build
  [ "$name" != before ] || b=$baseline
  local args=("${bench_args[@]}")
  [ "$what" = lat ] || args=(-m 8:8 -i "$rate_iters" -T 20 -r)
  echo "latency_compare.sh: round $k: $name ($what)" >&2
  # shellcheck disable=SC2046 # latency_opts is a word list by design
  # One benchmark binary for all (it is plain MPI); a baseline changes only the component.
  if ! DUALRAIL_BUILD_DIR=$b timeout 900 "$lab" mpirun -np "$nodes" --map-by node $(latency_opts "$name") \
       "$build/perf/dualrail-allreduce-bench" "${args[@]}" >"$work/$name.$what.$k" 2>"$work/$name.$what.$k.err"; then
    echo "latency_compare.sh: $name failed:" >&2
    tail -n 20 "$work/$name.$what.$k.err" >&2
    exit 1
  fi
}
for k in $(seq 1 "$rounds"); do
  for n in $(round_order "$k" "${names[@]}"); do run "$n" "$k" lat; done
  for n in $(round_order "$k" "${names[@]}"); do run "$n" "$k" rate; done
done

# The UCX floor, per size: one ucx_perftest server/client pair per size, bounded.
min=${sizes%%:*} max=${sizes##*:}
addr=$("$lab" addr 0 a)
port=13400
# A ucx_perftest built with MPI (UCX 1.18 on Debian 13) takes an MPI launch unless told
# -P 0 and then refuses a lone server/client pair; UCX 1.13's has no -P.
pt_mode=()
if [ "$(ucx_perftest -h 2>&1 | grep -ce '-P <0|1>')" != 0 ]; then pt_mode=(-P 0); fi
: >"$work/floor"
for ((s = min; s <= max; s *= 2)); do
  n=20000
  ((s <= 65536)) || n=$((20000 * 65536 / s > 200 ? 20000 * 65536 / s : 200))
  port=$((port + 1))
  "$lab" exec 0 env UCX_TLS=tcp UCX_NET_DEVICES=ethA timeout 120 ucx_perftest "${pt_mode[@]}" \
    -p "$port" >/dev/null 2>&1 &
  srv=$!
  sleep 0.3
  # A failed floor run is a "nan" in the table, not the end of the script (pipefail).
  lat=$("$lab" exec 1 env UCX_TLS=tcp UCX_NET_DEVICES=ethA timeout 120 ucx_perftest \
          "${pt_mode[@]}" "$addr" -p "$port" -t tag_lat -s "$s" -n "$n" 2>/dev/null |
          awk '/Final:/ {print $3}') || lat=
  [ -n "$lat" ] || echo "latency_compare.sh: ucx_perftest at $s B gave no figure (floor: nan)" >&2
  wait "$srv" 2>/dev/null || true
  echo "$s ${lat:-nan}" >>"$work/floor"
done

# The UCX floor of the exchange itself (perf/ucp_exchange.c: raw UCP, both ends sending at
# once, as the 2-rank allreduce does; tag_lat above is a ping-pong): same plane, same sizes.
: >"$work/floorx"
for ((s = min; s <= max && s <= 65536; s *= 2)); do
  d="$work/oob.$s"
  mkdir -p "$d"
  ucpx=(env UCX_TLS=tcp UCX_NET_DEVICES=ethA timeout 120 "$build/perf/dualrail-ucp-exchange" "$d")
  "$lab" exec 1 "${ucpx[@]}" 1 0 "$s" 20000 >/dev/null 2>&1 &
  peer=$!
  lat=$("$lab" exec 0 "${ucpx[@]}" 0 1 "$s" 20000 2>/dev/null | awk '{print $2}') || lat=
  wait "$peer" 2>/dev/null || true
  [ -n "$lat" ] || echo "latency_compare.sh: dualrail-ucp-exchange at $s B gave no figure" >&2
  echo "$s ${lat:-nan}" >>"$work/floorx"
done

python3 - "$work" "$nodes" "$rounds" "${names[@]}" <<'PY'
import math, os, statistics, sys
work, nodes, rounds, names = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4:]
def table(path):
    rows = {}
    for line in open(path):
        f = line.split()
        if f and not line.startswith("#"):
            rows[int(f[0])] = float(f[1])
    return rows
lat = {n: {} for n in names}
rate = {}
for n in names:
    for k in range(1, rounds + 1):
        for s, v in table(os.path.join(work, f"{n}.lat.{k}")).items():
            lat[n].setdefault(s, []).append(v)
    rate[n] = statistics.median(table(os.path.join(work, f"{n}.rate.{k}"))[8]
                                for k in range(1, rounds + 1))
lat = {n: {s: statistics.median(v) for s, v in lat[n].items()} for n in names}
floor = {int(a): float(b) for a, b in (l.split() for l in open(os.path.join(work, "floor")))}
floorx = {int(a): float(b) for a, b in (l.split() for l in open(os.path.join(work, "floorx")))}
p2 = 1 << (nodes.bit_length() - 1)        # recursive doubling (the component's small sizes):
rd_rounds = p2.bit_length() - 1 + (2 if p2 != nodes else 0)  # log2 rounds, +2 to fold extra ranks
stock = [n for n in ("ob1-tcp", "ucx") if n in names]
print(f"# allreduce latency, {nodes} ranks on {nodes} lab nodes (one each), planes not capped;")
print(f"# median of {rounds} interleaved rounds, microseconds; floor = {rd_rounds} x the one-way")
print("# latency of ucx_perftest tag_lat over TCP on plane A (the component's recursive-doubling sizes);")
print(f"# floor-x = {rd_rounds} x the raw UCP exchange on plane A (dualrail-ucp-exchange: both ends send at once)")
if "floor-c" in names:
    print("# floor-c = the same exchange as each timed MPI_Allreduce, on its own UCP worker on plane A")
    print("# beside the stock barrier (perf/floor_coll.c): dr/fl-c our own cost, fl-c/stock the position's")
cols = names + ["floor", "floor-x", "dr2/ob1", "dr2u/ucx", "dr2a/ucx", "dr/stock", "dr/floor", "dr/fl-x"] + (["dr/fl-c", "fl-c/stock"] if "floor-c" in names else []) + (["dr2/before"] if "before" in names else [])
print("%-9s" % "size" + "".join("%12s" % c for c in cols))
missed = []
ours = [n for n in ("dualrail-2", "dualrail-2u") if n in names]
for s in sorted(lat["dualrail-2"]):
    d2 = min(lat[n].get(s, math.inf) for n in ours)  # the better dualrail run (see the header)
    best = min(lat[n].get(s, math.inf) for n in stock)
    pair = lambda a, b: "%12.2f" % (lat[a][s] / lat[b][s])  # a run against the stock one with its barrier
    fl = rd_rounds * floor.get(s, math.nan) if s <= 65536 else math.nan
    fx = rd_rounds * floorx.get(s, math.nan) if s <= 65536 else math.nan
    ratio = lambda f: "%12s" % ("%.2f" % (d2 / f) if f == f else "-")
    cells = ["%12.2f" % lat[n].get(s, math.nan) for n in names]
    cells += ["%12.2f" % fl, "%12.2f" % fx, pair("dualrail-2", "ob1-tcp"), pair("dualrail-2u", "ucx"),
              pair("dualrail-2a", "ucx"),
              "%12.2f" % (d2 / best), ratio(fl), ratio(fx)]
    if "floor-c" in names:
        if s <= 65536:  # floor_coll.c's kFloorMaxBytes: larger calls are the ucx run's
            cells += ["%12.2f" % (d2 / lat["floor-c"][s]), "%12.2f" % (lat["floor-c"][s] / best)]
        else:
            cells += ["%12s" % "-"] * 2
    if "before" in names:
        cells.append("%12.3f" % (lat["dualrail-2"][s] / lat["before"][s]))
    print("%-9d" % s + "".join(cells))
    if s <= 2048:
        if d2 > best:
            missed.append(f"{s} B: dualrail {d2 / best:.2f} x the best stock path (<= 1.0)")
        if fl == fl and d2 > 1.6 * fl:
            missed.append(f"{s} B: dualrail {d2 / fl:.2f} x the UCX floor (<= 1.6)")
        if fx == fx and d2 > 1.6 * fx:
            missed.append(f"{s} B: dualrail {d2 / fx:.2f} x the UCX exchange floor (<= 1.6)")
    elif "before" in names and lat["dualrail-2"][s] > 1.03 * lat["before"][s]:
        missed.append(f"{s} B: dualrail-2 {lat['dualrail-2'][s] / lat['before'][s]:.3f} x before (<= 1.03)")
print()
print("# 8-byte message rate, back-to-back calls per second (median of the rounds)")
for n in names:
    print("%-12s %10.0f" % (n, rate[n]))
best_rate = max(rate[n] for n in stock)
our_rate = max(rate[n] for n in ours)
print()
print(f"target: sizes <= 2 KiB at <= 1.0 x the best stock path: "
      f"{'met' if not [m for m in missed if 'stock' in m] else 'MISSED'}")
print(f"target: sizes <= 2 KiB at <= 1.6 x the floor: tag_lat's (ping-pong) "
      f"{'met' if not [m for m in missed if 'UCX floor' in m] else 'MISSED'}, the exchange's "
      f"{'met' if not [m for m in missed if 'exchange floor' in m] else 'MISSED'}")
print(f"target: 8-byte rate, better dualrail run / best stock = {our_rate / best_rate:.2f} (>= 1.0): "
      f"{'met' if our_rate >= best_rate else 'MISSED'}")
if our_rate < best_rate:
    missed.append("8-byte message rate below the best stock path")
if "floor-c" in names:
    small = [s for s in sorted(lat["floor-c"]) if s <= 2048]
    if small:
        fc = [lat["floor-c"][s] / min(lat[n][s] for n in stock) for s in small]
        dc = [min(lat[n][s] for n in ours) / lat["floor-c"][s] for s in small]
        print(f"(not a target) sizes <= 2 KiB: floor-c {min(fc):.2f}-{max(fc):.2f} x the best stock "
              f"path, the better dualrail run {min(dc):.2f}-{max(dc):.2f} x floor-c; 8-byte rate "
              f"floor-c / best stock = {rate['floor-c'] / best_rate:.2f}")
if "before" in names:
    print(f"target: sizes above 2 KiB within 3 % of before: "
          f"{'met' if not [m for m in missed if 'before' in m] else 'MISSED'}")
for m in missed:
    print("missed:", m)
sys.exit(3 if missed else 0)
PY
