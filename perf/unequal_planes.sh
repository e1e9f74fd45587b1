#!/usr/bin/env bash
# Unequal and degraded planes: allreduce bandwidth when the planes deliver
# different rates, and when one is cut and restored under a running loop.
#
# 4 lab nodes, one rank each; a 16 MiB MPI_Allreduce (coll/dualrail, planes
# ethA,ethB, coll_dualrail_weights adaptive unless said) in a validated loop
# (perf/failover_timeline.c). One lab (plane caps changed in place with
# `tc qdisc change` on every node's leg and the switch's leg of the plane, the
# two places lab.sh caps it), runs in this order:
#
#   equal-even    both planes at 500 Mbit/s, coll_dualrail_weights equal
#                 (the split before adaptive weights: the reference)
#   equal         both planes at 500 Mbit/s, adaptive
#   a-alone       plane A alone (coll_dualrail_planes ethA) at 500 Mbit/s
#   500-250       plane B at 250 Mbit/s
#   500-50        plane B at 50 Mbit/s
#   degrade       both at 500; plane B cut to 50 Mbit/s --cut-at s into the
#                 loop and raised back to 500 Mbit/s at --restore-at s
#
#   perf/unequal_planes.sh [--bytes 16777216] [--seconds 8] [--degrade-seconds 18]
#                          [--cut-at 5] [--restore-at 11] [--out PREFIX]
#
# Prints every call of the degrade run (time since the loop start, seconds,
# bus bandwidth MB/s, phase), each run's median, then the targets (payload
# limit of a cap: at MTU 1500, 1448 of every 1514 bytes on the wire are TCP
# payload; bus bandwidth = size / time x 2(n-1)/n):
#   500-250   median >= 0.9 x the payload limit of 750 Mbit/s
#   500-50    median >= 1.0 x the a-alone median
#   cut       a call that starts after the cut, at >= 0.9 x the payload limit of
#             550 Mbit/s, ends within 2 s of the cut
#   restore   a call at >= 0.9 x the two-plane figure (median before the cut)
#             ends within 3 s of the restore
#   equal     adaptive median within 2 % of the equal-even median (or above)
# Writes PREFIX.png (the degrade run over time; needs gnuplot), PREFIX.tsv
# and PREFIX.txt; PREFIX defaults to unequal_planes in the current directory.
# Uses its own lab (prefix drunequal unless DUALRAIL_LAB_PREFIX is set) and
# removes it at exit. Needs root. Exit status: 0 targets met, 3 a target
# missed, 1 the run failed.
set -euo pipefail
export LC_ALL=C
root=$(cd "$(dirname "$0")/.." && pwd)
bytes=16777216 seconds=8 dseconds=18 cut_at=5 restore_at=11 out=$PWD/unequal_planes
while [ $# -gt 0 ]; do
  case "$1" in
    --bytes) bytes=${2:?}; shift ;;
    --seconds) seconds=${2:?}; shift ;;
    --degrade-seconds) dseconds=${2:?}; shift ;;
    --cut-at) cut_at=${2:?}; shift ;;
    --restore-at) restore_at=${2:?}; shift ;;
    --out) out=${2:?}; shift ;;
    -h|--help) sed -n '2,38p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "unequal_planes.sh: unknown option $1" >&2; exit 1 ;;
  esac
  shift
done
[[ $out == /* ]] || out=$PWD/$out
# shellcheck source=contrib/lib/perf.sh
. "$root/contrib/lib/perf.sh" # perf_build, perf_need_gnuplot, timeline_*
perf_build unequal_planes.sh "$root" perf/dualrail-failover-timeline
bench=$build/perf/dualrail-failover-timeline
perf_need_gnuplot unequal_planes.sh
export DUALRAIL_LAB_PREFIX=${DUALRAIL_LAB_PREFIX:-drunequal} DUALRAIL_BUILD_DIR=$build
lab=$root/contrib/lab.sh
# shellcheck source=contrib/lib/schedule.sh
. "$root/contrib/lib/schedule.sh" # stamp, sleep_until
# shellcheck source=contrib/lib/rate.sh
. "$root/contrib/lib/rate.sh" # plane_rate
work=$(mktemp -d /tmp/dualrail-unequal-XXXXXX)
trap '"$lab" down >/dev/null 2>&1 || true; rm -rf "$work"' EXIT
nodes=4
"$lab" up --nodes "$nodes" --rate 500mbit >/dev/null

set_rate() { plane_rate "$DUALRAIL_LAB_PREFIX" "$nodes" "$@"; }

steady() { # NAME SECONDS RATE_B [mpirun options]
  local name=$1 secs=$2 rb=$3
  shift 3
  set_rate b "$rb"
  echo "unequal_planes.sh: $name (plane A 500mbit, plane B $rb, $secs s)" >&2
  timeline_run "$name" "$secs" --mca coll_dualrail_stats 1 "$@"
  timeline_ok unequal_planes.sh "$work/$name.log"
}

steady equal-even "$seconds" 500mbit --mca coll_dualrail_planes ethA,ethB --mca coll_dualrail_weights equal
steady equal "$seconds" 500mbit --mca coll_dualrail_planes ethA,ethB
steady a-alone "$seconds" 500mbit --mca coll_dualrail_planes ethA
steady 500-250 "$seconds" 250mbit --mca coll_dualrail_planes ethA,ethB
steady 500-50 "$((seconds + 2))" 50mbit --mca coll_dualrail_planes ethA,ethB

set_rate b 500mbit
echo "unequal_planes.sh: degrade ($dseconds s; plane B cut to 50mbit at $cut_at s, back to 500mbit at $restore_at s)" >&2
timeline_run degrade "$dseconds" --mca coll_dualrail_stats 1 --mca coll_dualrail_planes ethA,ethB
t0=$(timeline_start "$work/degrade.log") || { wait "$job" || true; cut -d' ' -f2- "$work/degrade.log" >&2; exit 1; }
sleep_until "$(awk -v a="$t0" -v b="$cut_at" 'BEGIN { printf "%.6f", a + b }')"
cut_t=$EPOCHREALTIME
set_rate b 50mbit
sleep_until "$(awk -v a="$t0" -v b="$restore_at" 'BEGIN { printf "%.6f", a + b }')"
restore_t=$EPOCHREALTIME
set_rate b 500mbit
timeline_ok unequal_planes.sh "$work/degrade.log"

set +e
python3 - "$work" "$t0" "$cut_t" "$restore_t" "$out" "$bytes" <<'PY'
import re, statistics, sys
work, t0, cut_t, restore_t, out, nbytes = sys.argv[1:7]
t0, cut_t, restore_t = float(t0), float(cut_t), float(restore_t)
C, R = cut_t - t0, restore_t - t0
PAYLOAD = 1448.0 / 1514.0
def limit(mbit):  # bus bandwidth ceiling of a plane (or planes) capped at mbit, MB/s
    return mbit * 1e6 * PAYLOAD / 8 / 1e6

def calls(name):
    rows = []
    for line in open("%s/%s.log" % (work, name)):
        f = line.split()
        if len(f) == 5 and re.fullmatch(r"\d+", f[1]):
            rows.append((int(f[1]), float(f[2]), float(f[3]), float(f[4])))
    return rows  # (iter, start epoch, seconds, busbw)

def weights(name):  # "peer P plane I (dev) delivering Xx plane J: weight W" lines
    out = []
    for line in open("%s/%s.log" % (work, name)):
        m = re.search(r"coll/dualrail (rank \d+): (peer \d+ plane \d+ \(\w+\) delivering [0-9.]+x plane \d+: weight [0-9.]+)", line)
        if m:
            out.append((float(line.split()[0]), m.group(1) + ": " + m.group(2)))
    return out

def learned(name):  # (peer, plane B's share, its rate MB/s) of every sending link, from the
    out = []       # statistics tables printed at MPI_Finalize (coll_dualrail_stats 1)
    table = False
    for line in open("%s/%s.log" % (work, name)):
        f = line.split()
        if "weights (adaptive)" in line or "peer  plane" in line:
            table = True
            continue
        if table and len(f) == 6 and f[1].isdigit() and f[2].isdigit():
            if f[2] == "1" and f[5] != "-":
                out.append((int(f[1]), float(f[4]), float(f[5])))
            continue
        table = False
    return out

WARM = 2  # the first calls set up endpoints and pools
med = {}
for name in ("equal-even", "equal", "a-alone", "500-250", "500-50"):
    rows = calls(name)[WARM:]
    med[name] = (statistics.median(r[3] for r in rows), len(rows))
rows = calls("degrade")
def phase(r):
    s, e = r[1] - t0, r[1] - t0 + r[2]
    if e <= C: return "two-planes"
    if s < C: return "cut"
    if e <= R: return "b-at-50"
    if s < R: return "restore"
    return "b-back"
pre = [r for r in rows[WARM:] if r[1] + r[2] <= cut_t]
if len(pre) < 3:
    sys.exit("unequal_planes: fewer than 3 calls before the cut: raise --cut-at")
two = statistics.median(r[3] for r in pre)
lim_cut = limit(550)
# Only calls that start after the cut count: one running across it is mostly two-plane time
# (a call ending 0.01 s after the cut at the two-plane rate passed before).
after_cut = [r for r in rows if r[1] >= cut_t]
back_cut = next((r for r in after_cut if r[1] + r[2] <= restore_t and r[3] >= 0.9 * lim_cut), None)
cut_s = (back_cut[1] + back_cut[2] - cut_t) if back_cut else float("inf")
# As counted before (any call ending after the cut), for comparison with older figures.
old_cut = next((r for r in rows if r[1] + r[2] > cut_t and r[1] + r[2] <= restore_t and r[3] >= 0.9 * lim_cut), None)
old_cut_s = (old_cut[1] + old_cut[2] - cut_t) if old_cut else float("inf")
deg = [r for r in rows if phase(r) == "b-at-50"]
deg_med = statistics.median(r[3] for r in deg) if deg else float("nan")
back = next((r for r in rows if r[1] + r[2] > restore_t and r[3] >= 0.9 * two), None)
restore_s = (back[1] + back[2] - restore_t) if back else float("inf")
tail = [r for r in rows if back and r[1] >= back[1]]
tail_med = statistics.median(r[3] for r in tail) if tail else float("nan")

with open(out + ".tsv", "w") as f:
    f.write("# t_start_s\tseconds\tbusbw_MBps\tphase\titer\n")
    for r in rows:
        f.write("%.3f\t%.4f\t%.2f\t%s\t%d\n" % (r[1] - t0, r[2], r[3], phase(r), r[0]))

lines = []
p = lines.append
p("# unequal planes: 4 ranks, %s B allreduce; degrade run: plane B cut from 500 to 50 Mbit/s "
  "at %.2f s, back to 500 at %.2f s (since the loop start)" % (nbytes, C, R))
p("%8s %8s %10s  %s" % ("t (s)", "call (s)", "busbw MB/s", "phase"))
for r in rows:
    p("%8.3f %8.3f %10.2f  %s" % (r[1] - t0, r[2], r[3], phase(r)))
p("")
p("weight lines of the degrade run (s since the loop start):")
for t, w in weights("degrade"):
    p("  %7.3f  %s" % (t - t0, w))
downs = [line.split(" ", 1)[1].strip() for line in open("%s/degrade.log" % work) if " down: " in line]
p("")
p("planes declared down in the degrade run: %d%s" % (len(downs), (" (first: %s)" % downs[0]) if downs else ""))
p("")
p("medians (bus bandwidth MB/s, calls after the first %d):" % WARM)
for name, what in (("equal-even", "both 500, weights equal (the split before)"),
                   ("equal", "both 500, adaptive"), ("a-alone", "plane A alone at 500"),
                   ("500-250", "A 500, B 250, adaptive"), ("500-50", "A 500, B 50, adaptive")):
    p("  %-10s %7.2f  (%d calls; %s)" % (name, med[name][0], med[name][1], what))
p("  degrade    %7.2f before the cut (%d calls), %.2f while B at 50 (%d calls), %.2f after the return"
  % (two, len(pre), deg_med, len(deg), tail_med))
p("")
p("plane B's learned share at the end of a run, per sending link (peer: share, learned rate MB/s),")
p("against the caps' own proportion of B (1448/1514 of each cap is payload either way):")
for name, mb in (("500-250", 250), ("500-50", 50)):
    p("  %-8s true %.3f: %s" % (name, mb / (500.0 + mb),
      ", ".join("peer %d: %.3f, %.1f" % x for x in learned(name)) or "(no table)"))
p("")
res = []
def target(ok, text):
    res.append(bool(ok))
    p("%-78s %s" % (text, "met" if ok else "MISSED"))
v = med["500-250"][0] / limit(750)
target(v >= 0.9, "500/250   %.2f MB/s = %.2f x payload limit of 750 Mbit/s (%.2f)    target >= 0.9"
       % (med["500-250"][0], v, limit(750)))
v = med["500-50"][0] / med["a-alone"][0]
target(v >= 1.0, "500/50    %.2f MB/s = %.2f x plane A alone (%.2f)               target >= 1.0"
       % (med["500-50"][0], v, med["a-alone"][0]))
target(cut_s <= 2.0, "cut       >= 0.9 x limit of 550 Mbit/s (%.2f) %.2f s after the cut      target <= 2 s"
       % (lim_cut, cut_s))
p("          (counting calls that began before the cut too, as before: %.2f s)" % old_cut_s)
target(restore_s <= 3.0, "restore   >= 0.9 x two-plane (%.2f) %.2f s after the restore          target <= 3 s"
       % (two, restore_s))
v = med["equal"][0] / med["equal-even"][0]
target(v >= 0.98, "equal     adaptive %.2f MB/s = %.3f x weights equal (%.2f)         target >= 0.98"
       % (med["equal"][0], v, med["equal-even"][0]))
p("targets: %s" % ("all met" if all(res) else "%d of %d missed" % (res.count(False), len(res))))
text = "\n".join(lines) + "\n"
open(out + ".txt", "w").write(text)
sys.stdout.write(text)

gp = out + ".gp"
top = max(max(r[3] for r in rows), two) * 1.15
with open(gp, "w") as f:
    f.write('set terminal pngcairo size 1100,550 font "sans,10"\n')
    f.write('set output "%s.png"\n' % out)
    f.write('set title "coll/dualrail allreduce %s B, 4 ranks, adaptive weights: plane B cut from '
            '500 to 50 Mbit/s %.1f-%.1f s"\n' % (nbytes, C, R))
    f.write('set xlabel "time since the loop start (s)"\nset ylabel "bus bandwidth (MB/s)"\n')
    f.write('set grid\nset key bottom right\nset xrange [0:*]\nset yrange [0:%f]\n' % top)
    f.write('set object 1 rect from %f, graph 0 to %f, graph 1 fc rgb "#fff0cc" fs solid 0.7 '
            'noborder behind\n' % (C, R))
    f.write('set label 1 "plane B at 50 Mbit/s" at %f, graph 0.96\n' % (C + 0.15))
    f.write('plot "%s.tsv" using ($1+$2/2):3:1:($1+$2) with xerrorbars pt 7 ps 0.5 '
            'lc rgb "#1f77b4" title "each call (bar: its duration)", \\\n' % out)
    f.write('     %f with lines dt 2 lc rgb "#2ca02c" title "two planes before the cut %.1f MB/s", \\\n'
            % (two, two))
    f.write('     %f with lines dt 2 lc rgb "#d62728" title "limit of 500+50 Mbit/s %.1f MB/s", \\\n'
            % (lim_cut, lim_cut))
    f.write('     %f with lines dt 3 lc rgb "#ff7f0e" title "plane A alone %.1f MB/s"\n'
            % (med["a-alone"][0], med["a-alone"][0]))
print("plot script %s" % gp)
sys.exit(0 if all(res) else 3)
PY
rc=$?
set -e
[ "$rc" -eq 0 ] || [ "$rc" -eq 3 ] || { echo "unequal_planes.sh: analysis failed" >&2; exit 1; }
if command -v gnuplot >/dev/null; then
  gnuplot "$out.gp" && echo "unequal_planes.sh: wrote $out.png, $out.tsv, $out.txt" >&2
fi
exit "$rc"
