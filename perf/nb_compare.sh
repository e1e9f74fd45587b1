#!/usr/bin/env bash
# Non-blocking overlap and threads on the lab (issue 15). 4 nodes, one rank each,
# every plane capped at 500 Mbit/s so that the planes, not the two-core machine,
# are the bottleneck; 16 MiB allreduces (MPI_FLOAT, MPI_SUM), coll/dualrail on
# both planes.
#
#   perf/nb_compare.sh [--rate 500mbit] [--iters N] [--tests N] [--base BUILD_DIR]
#
#   overlap      dualrail-nb-bench overlap (OSU osu_iallreduce's method): without
#                MPI_Test during the compute (OSU's default), and with --tests N
#                (default 100) MPI_Test calls spread over it (OSU's -t); both
#                again with coll_dualrail_progress_thread 1
#   threads      dualrail-nb-bench threads: 1 thread (reference), then 2 threads on
#                2 communicators at once (MPI_THREAD_MULTIPLE), aggregate bus
#                bandwidth against the two planes' payload limit (2 x rate / 8 x
#                1448/1514: TCP payload of a 1514-byte frame at MTU 1500, what tc
#                counts)
#   --base DIR   also: MPI_Allreduce latency (dualrail-allreduce-bench) with DIR's
#                component (a build of the commit before this work) and with this
#                one, alternately, three times each: 16 MiB on the capped lab, 8 B
#                on an uncapped one of 2 nodes (one rank per core, as
#                perf/latency_compare.sh): single-threaded jobs must pay nothing
#                for thread safety (target: within 3 %)
# Uses its own lab (prefix drnb unless DUALRAIL_LAB_PREFIX is set), removed at exit.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
rate=500mbit iters=5 tests=100 base=
while [ $# -gt 0 ]; do
  case "$1" in
    --rate) rate=${2:?}; shift ;;
    --iters) iters=${2:?}; shift ;;
    --tests) tests=${2:?}; shift ;;
    --base) base=${2:?}; shift ;;
    -h|--help) sed -n '2,22p' "$0"; exit 0 ;;
    *) echo "nb_compare.sh: unknown option $1" >&2; exit 2 ;;
  esac
  shift
done
# shellcheck source=contrib/lib/perf.sh
. "$root/contrib/lib/perf.sh" # perf_build
perf_build nb_compare.sh "$root" perf/dualrail-nb-bench perf/dualrail-allreduce-bench
nb=$build/perf/dualrail-nb-bench
ar=$build/perf/dualrail-allreduce-bench
if [ -n "$base" ]; then
  [ -e "$base/mpi_coll/mca_coll_dualrail.so" ] || { echo "nb_compare.sh: $base has no component" >&2; exit 1; }
fi
export DUALRAIL_LAB_PREFIX=${DUALRAIL_LAB_PREFIX:-drnb} DUALRAIL_BUILD_DIR=$build
lab=$root/contrib/lab.sh
work=$(mktemp -d /tmp/dualrail-nb-XXXXXX)
trap '"$lab" down >/dev/null 2>&1 || true; rm -rf "$work"' EXIT
"$lab" up --nodes 4 --rate "$rate" >/dev/null
dr=(--mca coll_dualrail_priority 100 --mca coll_dualrail_planes ethA,ethB)
run() { # name, command...
  local name=$1; shift
  echo "nb_compare.sh: $name" >&2
  if ! timeout 900 "$lab" mpirun -np "${np:-4}" --map-by node "${dr[@]}" "$@" >"$work/$name.out" 2>"$work/$name.err"; then
    echo "nb_compare.sh: $name failed:" >&2
    tail -n 20 "$work/$name.err" "$work/$name.out" >&2
    exit 1
  fi
  grep -q "WRONG" "$work/$name.out" && { echo "nb_compare.sh: $name: wrong results" >&2; exit 1; }
  return 0
}
run overlap0 "$nb" overlap --iters "$iters"
run overlapT "$nb" overlap --iters "$iters" --tests "$tests"
run overlapP0 --mca coll_dualrail_progress_thread 1 "$nb" overlap --iters "$iters"
run overlapPT --mca coll_dualrail_progress_thread 1 "$nb" overlap --iters "$iters" --tests "$tests"
run threads1 "$nb" threads --iters $((iters * 2)) --threads 1
run threads2 "$nb" threads --iters $((iters * 2)) --threads 2
if [ -n "$base" ]; then
  compare() { # size iters
    for round in 1 2 3; do
      for which in base this; do
        dir=$build
        [ "$which" = this ] || dir=$base
        DUALRAIL_BUILD_DIR=$dir run "$which-$1-$round" --mca coll_dualrail_barrier 0 \
          --mca coll_dualrail_bcast 0 "$ar" -m "$1:$1" -i "$2"
      done
    done
  }
  compare 16777216 10
  "$lab" down >/dev/null
  "$lab" up --nodes 2 >/dev/null
  np=2 compare 8 20000
fi
python3 - "$work" "$rate" "$tests" "$base" <<'PY'
import os, sys
work, rate, tests, base = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4]
def rows(name):
    return [l.split() for l in open(os.path.join(work, name + ".out"))
            if l.strip() and not l.startswith("#") and l[0].isdigit()]
def mbit(r):
    r = r.lower()
    for suf, mul in (("gbit", 1e9), ("mbit", 1e6), ("kbit", 1e3)):
        if r.endswith(suf):
            return float(r[: -len(suf)]) * mul
    return float(r)
limit = 2 * mbit(rate) / 8 * 1448 / 1514 / 1e6
print(f"# 16 MiB allreduce, 4 ranks on 4 lab nodes, planes capped at {rate} each")
print("# overlap (OSU method)     t_block ms  t_pure ms  t_cpu ms  t_total ms  overlap %  pure/block")
for name, what in (("overlap0", "no MPI_Test (OSU default)"), ("overlapT", f"{tests} MPI_Test calls"),
                   ("overlapP0", "progress thread"), ("overlapPT", f"thread + {tests} MPI_Test")):
    f = rows(name)[0]
    print(f"{what:26s} {float(f[0]):10.1f} {float(f[1]):10.1f} {float(f[2]):9.1f} {float(f[3]):11.1f} {float(f[4]):10.1f} {float(f[5]):11.3f}")
t1 = float(rows("threads1")[0][1])
t2 = float(rows("threads2")[0][1])
print("# threads x communicators   aggregate bus MB/s   / payload limit")
print(f"1 thread                   {t1:18.2f} {t1 / limit:16.2f}")
print(f"2 threads, 2 communicators {t2:18.2f} {t2 / limit:16.2f}")
print(f"# two-plane payload limit: {limit:.2f} MB/s")
o = {n: rows(n)[0] for n in ("overlap0", "overlapT", "overlapP0", "overlapPT")}
print()
print("target: overlap >= 80 %: " + ", ".join(f"{float(o[n][4]):.1f} %" for n in o) +
      " (no test, tests, thread, thread + tests)")
print("target: non-blocking pure time / blocking <= 1.1: " + ", ".join(f"{float(o[n][5]):.3f}" for n in o))
print(f"target: 2 threads' aggregate bus BW / payload limit >= 0.9: {t2 / limit:.2f}")
if base:
    print("# single-threaded cost of this work: average latency us (3 runs each, alternating;"
          " 16 MiB: 4 nodes, capped; 8 B: 2 nodes, uncapped)")
    for sz in ("16777216", "8"):
        b = [float(rows(f"base-{sz}-{r}")[0][1]) for r in (1, 2, 3)]
        t = [float(rows(f"this-{sz}-{r}")[0][1]) for r in (1, 2, 3)]
        print(f"{sz:>9s} B   before " + " ".join(f"{x:.1f}" for x in b) + "   this " +
              " ".join(f"{x:.1f}" for x in t) +
              f"   ratio of medians {sorted(t)[1] / sorted(b)[1]:.3f} (target <= 1.03)")
PY
