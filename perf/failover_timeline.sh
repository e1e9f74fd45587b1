#!/usr/bin/env bash
# Failover timeline: allreduce bandwidth over time while a plane dies and heals.
#
# 4 lab nodes, one rank each, every plane capped at --rate (500 Mbit/s); a
# 16 MiB MPI_Allreduce (coll/dualrail, planes ethA,ethB) in a loop for 20 s;
# plane A of node 1 black-holed 5 s into the loop and healed at 12 s (this
# script injects both at those wall times, counted from the loop's start).
# Before it, unless --no-one-plane, the same loop for --one-plane-seconds on
# plane A alone gives the one-plane figure (with --no-one-plane: half the
# two-plane figure, the ideal of two equal planes).
#
#   perf/failover_timeline.sh [--rate 500mbit] [--bytes 16777216] [--seconds 20]
#                             [--fault-at 5] [--heal-at 12] [--node 1]
#                             [--one-plane-seconds 8] [--no-one-plane]
#                             [--out PREFIX] [--coll allreduce|alltoall]
#
# --coll alltoall (issue 14): MPI_Alltoall of --bytes per rank instead, bus
# bandwidth = bytes / time x (n-1)/n.
#
# Prints every call (time since the loop start, seconds, bus bandwidth MB/s,
# phase), the plane transitions, then the figures against the targets:
#   fault     the call that sees the fault takes <= 1 s longer than a normal one
#   degraded  median bandwidth while plane A is cut >= 0.9 x the one-plane figure
#   recovery  within 3 s of the heal a call runs at >= 0.9 x the two-plane figure
# Writes PREFIX.png (bandwidth over time, fault window shaded; needs gnuplot,
# Debian package gnuplot-nox), PREFIX.tsv (the calls) and PREFIX.txt (the
# summary); PREFIX defaults to failover_timeline in the current directory.
# Uses its own lab (prefix drtimeline unless DUALRAIL_LAB_PREFIX is set) and
# removes it at exit. Needs root. Exit status: 0 targets met, 3 a target
# missed, 1 the run failed.
set -euo pipefail
export LC_ALL=C
root=$(cd "$(dirname "$0")/.." && pwd)
rate=500mbit bytes=16777216 seconds=20 fault_at=5 heal_at=12 node=1
one_seconds=8 one_plane=1 out=$PWD/failover_timeline coll=allreduce
while [ $# -gt 0 ]; do
  case "$1" in
    --rate) rate=${2:?}; shift ;;
    --bytes) bytes=${2:?}; shift ;;
    --seconds) seconds=${2:?}; shift ;;
    --fault-at) fault_at=${2:?}; shift ;;
    --heal-at) heal_at=${2:?}; shift ;;
    --node) node=${2:?}; shift ;;
    --one-plane-seconds) one_seconds=${2:?}; shift ;;
    --no-one-plane) one_plane=0 ;;
    --out) out=${2:?}; shift ;;
    --coll) coll=${2:?}; shift ;;
    -h|--help) sed -n '2,28p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "failover_timeline.sh: unknown option $1" >&2; exit 1 ;;
  esac
  shift
done
[[ $out == /* ]] || out=$PWD/$out
timeline_args=(--coll "$coll") # passed to the benchmark by timeline_run
# The benchmark's per-call verdict exchange (MPI_Allgather) must stay on the stock path
# (management network): on the planes it would absorb the failure detection between two
# timed calls, and the "fault call" would look free.
stock_verdicts=(--mca coll_dualrail_allgather 0)
# shellcheck source=contrib/lib/perf.sh
. "$root/contrib/lib/perf.sh" # perf_build, perf_need_gnuplot, timeline_*
perf_build failover_timeline.sh "$root" perf/dualrail-failover-timeline
bench=$build/perf/dualrail-failover-timeline
perf_need_gnuplot failover_timeline.sh
export DUALRAIL_LAB_PREFIX=${DUALRAIL_LAB_PREFIX:-drtimeline} DUALRAIL_BUILD_DIR=$build
lab=$root/contrib/lab.sh
# shellcheck source=contrib/lib/schedule.sh
. "$root/contrib/lib/schedule.sh" # stamp, sleep_until
work=$(mktemp -d /tmp/dualrail-timeline-XXXXXX)
trap '"$lab" fault "$node" a heal >/dev/null 2>&1 || true; "$lab" down >/dev/null 2>&1 || true; rm -rf "$work"' EXIT
nodes=4
"$lab" up --nodes "$nodes" --rate "$rate" >/dev/null


if [ "$one_plane" -eq 1 ]; then
  echo "failover_timeline.sh: one-plane run (plane A only, $one_seconds s)" >&2
  timeline_run one "$one_seconds" "${stock_verdicts[@]}" --mca coll_dualrail_planes ethA
  timeline_ok failover_timeline.sh "$work/one.log"
fi

echo "failover_timeline.sh: two-plane run ($seconds s; plane A of node $node black-holed at $fault_at s, healed at $heal_at s)" >&2
timeline_run two "$seconds" "${stock_verdicts[@]}" --mca coll_dualrail_planes ethA,ethB
t0=$(timeline_start "$work/two.log") || { wait "$job" || true; cut -d' ' -f2- "$work/two.log" >&2; exit 1; }
sleep_until "$(awk -v a="$t0" -v b="$fault_at" 'BEGIN { printf "%.6f", a + b }')"
fault_t=$EPOCHREALTIME
"$lab" fault "$node" a blackhole
sleep_until "$(awk -v a="$t0" -v b="$heal_at" 'BEGIN { printf "%.6f", a + b }')"
heal_t=$EPOCHREALTIME
"$lab" fault "$node" a heal
timeline_ok failover_timeline.sh "$work/two.log"

one_log=
[ "$one_plane" -eq 0 ] || one_log=$work/one.log
set +e
python3 - "$work/two.log" "$t0" "$fault_t" "$heal_t" "$out" "$rate" "$bytes" "$coll" "${one_log}" <<'PY'
import re, statistics, sys
log, t0, fault_t, heal_t, out, rate, nbytes, coll = sys.argv[1:9]
one_log = sys.argv[9] if len(sys.argv) > 9 else ""
t0, fault_t, heal_t = float(t0), float(fault_t), float(heal_t)
F, H = fault_t - t0, heal_t - t0

def calls(path):
    rows = []
    for line in open(path):
        f = line.split()
        if len(f) == 5 and re.fullmatch(r"\d+", f[1]):
            rows.append((int(f[1]), float(f[2]), float(f[3]), float(f[4])))
    return rows  # (iter, start epoch, seconds, busbw)

rows = calls(log)
trans = []  # (time since t0, text)
for line in open(log):
    stamp, _, text = line.partition(" ")
    m = re.search(r"coll/dualrail (rank \d+: peer \d+ (?:\([^)]*\) )?plane \d+ \(.*?\)) (down|re-admitted)", text)
    if m:
        trans.append((float(stamp) - t0, m.group(2), m.group(1)))

WARM = 2  # the first calls set up endpoints and pools
pre = [r for r in rows[WARM:] if r[1] + r[2] <= fault_t]
if len(pre) < 3:
    sys.exit("failover_timeline: fewer than 3 calls before the fault: raise --fault-at")
two = statistics.median(r[3] for r in pre)
normal = statistics.median(r[2] for r in pre)
if one_log:
    one_rows = calls(one_log)[WARM:]
    one = statistics.median(r[3] for r in one_rows)
    one_src = "measured: plane A alone, median of %d calls" % len(one_rows)
else:
    one = two / 2
    one_src = "half the two-plane figure (two equal planes, no one-plane run)"

downs = [t for t, k, _ in trans if k == "down"]
ups = [t for t, k, _ in trans if k == "re-admitted"]
first_down = min(downs) if downs else None
last_up = max(ups) if ups else None

def phase(r):
    s, e = r[1] - t0, r[1] - t0 + r[2]
    if e <= F: return "before"
    if s < F + 1e-9 or (first_down is not None and s <= first_down): return "fault"
    if e <= H: return "degraded"
    if s < H: return "heal"
    return "after"

# The call that sees the fault: the slowest of those in flight between the fault and the
# first down (or, without a down, the one in flight at the fault).
seeing = [r for r in rows if phase(r) == "fault"]
fault_call = max(seeing, key=lambda r: r[2]) if seeing else None
extra = fault_call[2] - normal if fault_call else float("nan")
degraded = [r for r in rows if phase(r) == "degraded"]
deg = statistics.median(r[3] for r in degraded) if degraded else float("nan")
after = [r for r in rows if r[1] - t0 >= H]
back = next((r for r in after if r[3] >= 0.9 * two), None)
back_t = (back[1] + back[2] - heal_t) if back else float("inf")
tail = [r for r in after if back and r[1] >= back[1]]
tail_med = statistics.median(r[3] for r in tail) if tail else float("nan")

with open(out + ".tsv", "w") as f:
    f.write("# t_start_s\tseconds\tbusbw_MBps\tphase\titer\n")
    for r in rows:
        f.write("%.3f\t%.4f\t%.2f\t%s\t%d\n" % (r[1] - t0, r[2], r[3], phase(r), r[0]))

lines = []
p = lines.append
p("# failover timeline: 4 ranks, %s B %s, planes capped at %s; plane A of one node "
  "black-holed at %.2f s, healed at %.2f s (since the loop start)" % (nbytes, coll, rate, F, H))
p("%8s %8s %10s  %s" % ("t (s)", "call (s)", "busbw MB/s", "phase"))
for r in rows:
    p("%8.3f %8.3f %10.2f  %s" % (r[1] - t0, r[2], r[3], phase(r)))
p("")
p("plane transitions (s since the loop start):")
for t, k, who in trans:
    p("  %7.3f  %s %s" % (t, who, k))
p("")
p("two-plane figure      %7.2f MB/s  (median of %d calls before the fault; a call takes %.3f s)" % (two, len(pre), normal))
p("one-plane figure      %7.2f MB/s  (%s)" % (one, one_src))
if first_down is not None:
    p("detection             first down %.3f s after the fault" % (first_down - F))
if last_up is not None:
    p("re-admission          last re-admission %.3f s after the heal" % (last_up - H))
res = []
ok1 = fault_call is not None and extra <= 1.0
res.append(ok1)
p("fault call            %.3f s, %+.3f s vs normal            target <= +1 s      %s" % (
    fault_call[2] if fault_call else float("nan"), extra, "met" if ok1 else "MISSED"))
ok2 = degraded and deg >= 0.9 * one
res.append(bool(ok2))
p("degraded bandwidth    %7.2f MB/s = %.2f x one-plane (%d calls)  target >= 0.9 x    %s" % (
    deg, deg / one, len(degraded), "met" if ok2 else "MISSED"))
ok3 = back_t <= 3.0
res.append(ok3)
p("recovery              >= 0.9 x two-plane %.2f s after the heal   target <= 3 s      %s" % (
    back_t, "met" if ok3 else "MISSED"))
p("after recovery        median %.2f MB/s = %.2f x two-plane (%d calls)" % (
    tail_med, tail_med / two if two else float("nan"), len(tail)))
p("targets: %s" % ("all met" if all(res) else "%d of 3 missed" % res.count(False)))
text = "\n".join(lines) + "\n"
open(out + ".txt", "w").write(text)
sys.stdout.write(text)

# gnuplot script: bandwidth of each call drawn over its duration, fault window shaded.
gp = out + ".gp"
top = max(r[3] for r in rows) * 1.15
with open(gp, "w") as f:
    f.write('set terminal pngcairo size 1100,550 font "sans,10"\n')
    f.write('set output "%s.png"\n' % out)
    f.write('set title "coll/dualrail %s %s B, 4 ranks, planes at %s: plane A of one node '
            'black-holed %.1f-%.1f s"\n' % (coll, nbytes, rate, F, H))
    f.write('set xlabel "time since the loop start (s)"\nset ylabel "bus bandwidth (MB/s)"\n')
    f.write('set grid\nset key bottom right\nset xrange [0:*]\nset yrange [0:%f]\n' % top)
    f.write('set object 1 rect from %f, graph 0 to %f, graph 1 fc rgb "#ffdddd" fs solid 0.6 '
            'noborder behind\n' % (F, H))
    f.write('set label 1 "plane A cut" at %f, graph 0.96\n' % (F + 0.15))
    marks = ([(first_down, "first down")] if first_down is not None else []) + \
            ([(last_up, "re-admitted")] if last_up is not None else [])
    for i, (t, what) in enumerate(marks):
        f.write('set arrow %d from %f, graph 0 to %f, graph 1 nohead dt 2 lc rgb "#888888"\n'
                % (i + 1, t, t))
        f.write('set label %d "%s %.2f s" at %f, graph 0.90\n' % (i + 2, what, t, t + 0.15))
    f.write('plot "%s.tsv" using ($1+$2/2):3:1:($1+$2) with xerrorbars pt 7 ps 0.5 '
            'lc rgb "#1f77b4" title "each call (bar: its duration)", \\\n' % out)
    f.write('     %f with lines dt 2 lc rgb "#2ca02c" title "two-plane figure %.1f MB/s", \\\n'
            % (two, two))
    f.write('     %f with lines dt 2 lc rgb "#ff7f0e" title "one-plane figure %.1f MB/s"\n'
            % (one, one))
print("plot script %s" % gp)
sys.exit(0 if all(res) else 3)
PY
rc=$?
set -e
[ "$rc" -eq 0 ] || [ "$rc" -eq 3 ] || { echo "failover_timeline.sh: analysis failed" >&2; exit 1; }
if command -v gnuplot >/dev/null; then
  gnuplot "$out.gp" && echo "failover_timeline.sh: wrote $out.png, $out.tsv, $out.txt" >&2
fi
exit "$rc"
