#!/usr/bin/env python3
"""The analysis of perf/syscall_timeline.sh: CONFIG PERF_SCRIPT_OUTPUT.

Reads `perf script --ns -F comm,tid,time,event` of the send and receive system calls'
enter/exit tracepoints, keeps the two busiest threads of dualrail-allreduce-bench (the
two ranks' main threads), pairs each enter with its exit, and finds the benchmark's
iterations in each rank's call sequence (S: a send, R: a receive):
  root   S R | S R | S     barrier | timed allreduce | stop broadcast
  other  S R | S R | R
an iteration counting where the sequence around it matches exactly (a call of another
kind, or a receive that found nothing, drops it). Prints the medians of its parts and
the start skew between the ranks' allreduce sends (see syscall_timeline.sh).
"""
import bisect
import collections
import re
import statistics
import sys

SENDS = {"sendmsg", "sendto", "writev"}
LINE = re.compile(r"\s*(\S+)\s+(\d+)\s+([\d.]+):\s+syscalls:sys_(enter|exit)_(\w+)")


def calls(path):
    """Per thread of the benchmark: [(kind, name, enter_us, exit_us)] in time order."""
    per, open_call = collections.defaultdict(list), {}
    with open(path) as f:
        for line in f:
            m = LINE.match(line)
            if not m or not m.group(1).startswith("dualrail-allred"):
                continue
            tid, t, edge, name = int(m.group(2)), float(m.group(3)) * 1e6, m.group(4), m.group(5)
            if edge == "enter":
                open_call[tid] = (name, t)
            elif tid in open_call and open_call[tid][0] == name:
                per[tid].append(("S" if name in SENDS else "R", name, open_call.pop(tid)[1], t))
    return per


def iterations(seq, root):
    """(barrier send, barrier recv, allreduce send, allreduce recv, next) per iteration."""
    kinds = "".join(c[0] for c in seq)
    pattern, before = ("SRSRS", "S") if root else ("SRSRR", "R")
    return [seq[i:i + 5] for i in range(1, len(seq) - 5)
            if kinds[i:i + 5] == pattern and kinds[i - 1] == before]


def med(values):
    return statistics.median(values) if values else float("nan")


def main():
    config, path = sys.argv[1], sys.argv[2]
    per = calls(path)
    tids = sorted(per, key=lambda t: -len(per[t]))[:2]
    if len(tids) < 2:
        print(f"{config}: fewer than two ranks' calls recorded")
        return 1
    # The root sends twice in a row (broadcast, next barrier); the other receives twice.
    twice = {t: sum(1 for a, b in zip(per[t], per[t][1:]) if a[0] == b[0] == "S") for t in tids}
    root, other = sorted(tids, key=lambda t: -twice[t])
    its = {root: iterations(per[root], True), other: iterations(per[other], False)}
    print(f"{config}: {len(per[root]) + len(per[other])} calls recorded, "
          f"{len(its[root])} and {len(its[other])} iterations matched (root, other); "
          "medians in us")
    print("  rank    pre-send   send   wait   recv   allreduce (barrier recv exit .. recv exit)")
    for name, t in (("root", root), ("other", other)):
        rows = its[t]
        print("  %-6s %9.1f %6.1f %6.1f %6.1f %8.1f" % (
            name,
            med([r[2][2] - r[1][3] for r in rows]),
            med([r[2][3] - r[2][2] for r in rows]),
            med([r[3][2] - r[2][3] for r in rows]),
            med([r[3][3] - r[3][2] for r in rows]),
            med([r[3][3] - r[1][3] for r in rows])))
    # Match each root allreduce send with the other's nearest one (same iteration).
    sends = [r[2] for r in its[other]]
    starts = [s[2] for s in sends]
    pairs = []
    for r in its[root]:
        s0 = r[2]
        j = bisect.bisect_left(starts, s0[2])
        near = [sends[k] for k in (j - 1, j) if 0 <= k < len(sends)]
        if near:
            s1 = min(near, key=lambda s: abs(s[2] - s0[2]))
            if abs(s1[2] - s0[2]) < 30:
                pairs.append((s1[2] - s0[2], s0[3] - s0[2], s1[3] - s1[2]))
    if not pairs:
        return 0
    print(f"  the other rank's allreduce send starts {med([p[0] for p in pairs]):.1f} us after "
          f"the root's (median of {len(pairs)}); send costs by that skew:")
    print("    skew us      n   root send  other send")
    by = collections.defaultdict(list)
    for d, a, b in pairs:
        by[max(-12, min(12, 3 * int(d // 3)))].append((a, b))
    for d in sorted(by):
        v = by[d]
        label = ("<= %d" % d) if d == -12 else ((">= %d" % d) if d == 12 else "%+d..%+d" % (d, d + 3))
        print("    %-9s %6d %10.1f %11.1f" % (label, len(v), med([x[0] for x in v]),
                                             med([x[1] for x in v])))
    return 0


if __name__ == "__main__":
    sys.exit(main())
