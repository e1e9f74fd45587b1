#!/usr/bin/env bash
# Where a small allreduce's time goes, per call and per rank, from the kernel's own
# tracepoints: the same breakdown for coll/dualrail and for the stock paths.
#
#   perf/syscall_timeline.sh [--config NAME]... [--size BYTES] [--seconds S]
#
# For each configuration (latency_compare.sh's: dualrail-1, dualrail-2, dualrail-2u, dualrail-2a,
# ob1-tcp, ucx; default dualrail-2 and ucx) it runs the latency benchmark
# (dualrail-allreduce-bench, 2 lab nodes x 1 rank, --map-by node, planes not capped), and
# in the middle of the run records S seconds (default 0.3, at most 2) of the ranks' send and receive
# system calls (sys_enter/sys_exit of sendmsg, sendto, writev, recvfrom, readv, with
# `perf record -a`). Every iteration of the benchmark is barrier, timed allreduce, stop
# broadcast; on the two ranks that is the call sequence
#   root:   send recv | send recv | send          (barrier | allreduce | broadcast)
#   other:  send recv | send recv | recv
# and perf/syscall_timeline.py prints, per rank, the median of each part of the allreduce:
#   pre-send   from the barrier's last receive returning to the allreduce's send entering
#              (user space: the barrier's exit, the benchmark, the collective's path to
#              its send; on the other rank measured from its barrier receive as well)
#   send       the send system call (on the lab: TCP over veth and a bridge, the delivery
#              into the peer's socket included)
#   wait       from the send returning to the receive that finds the peer's data
#   recv       that receive system call
# and the time the other rank starts its send after the root, with the send costs of both
# by that skew: the rank that starts second pays for both (its socket is busy, so the
# first one's data is processed when it releases it), which is what decides the call's
# latency on this lab more than any user-space cost. Tracing adds about a microsecond to
# every system call (the figures are longer than latency_compare.sh's; compare
# configurations, not absolute times). Needs root and perf (apt-get install linux-perf).
# Uses its own lab (prefix drtimeline unless DUALRAIL_LAB_PREFIX is set), removed at exit.
set -euo pipefail
export LC_ALL=C
root=$(cd "$(dirname "$0")/.." && pwd)
configs=() size=8 seconds=0.3
while [ $# -gt 0 ]; do
  case "$1" in
    --config) configs+=("${2:?}"); shift ;;
    --size) size=${2:?}; shift ;;
    --seconds) seconds=${2:?}; shift ;;
    -h|--help) sed -n '2,30p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "syscall_timeline.sh: unknown option $1" >&2; exit 1 ;;
  esac
  shift
done
[ ${#configs[@]} -gt 0 ] || configs=(dualrail-2 ucx)
[[ $size =~ ^[0-9]+$ && $size -ge 4 && $size -le 65536 ]] ||
  { echo "syscall_timeline.sh: --size 4..65536 bytes" >&2; exit 1; }
[[ $seconds =~ ^[0-9]*\.?[0-9]+$ ]] && awk -v s="$seconds" 'BEGIN { exit !(s > 0 && s <= 2) }' ||
  { echo "syscall_timeline.sh: --seconds in (0, 2]" >&2; exit 1; }
. "$root/contrib/lib/latency.sh" # latency_opts
for c in "${configs[@]}"; do
  [ "$c" != before ] && latency_opts "$c" >/dev/null ||
    { echo "syscall_timeline.sh: unknown configuration $c" >&2; exit 1; }
done
command -v perf >/dev/null || { echo "syscall_timeline.sh: perf missing (apt-get install linux-perf)" >&2; exit 1; }
. "$root/contrib/lib/perf.sh" # perf_build
perf_build syscall_timeline.sh "$root" perf/dualrail-allreduce-bench
export DUALRAIL_LAB_PREFIX=${DUALRAIL_LAB_PREFIX:-drtimeline} DUALRAIL_BUILD_DIR=$build
lab=$root/contrib/lab.sh
work=$(mktemp -d /tmp/dualrail-timeline-XXXXXX)
trap '"$lab" down >/dev/null 2>&1 || true; rm -rf "$work"' EXIT
"$lab" up --nodes 2 >/dev/null
events=()
for s in sendmsg sendto writev recvfrom readv; do
  events+=(-e "syscalls:sys_enter_$s" -e "syscalls:sys_exit_$s")
done
for c in "${configs[@]}"; do
  echo "syscall_timeline.sh: $c" >&2
  # Bounded: the benchmark stops after 4 s of timed calls (-T; some 10 s in all, each
  # iteration also has a barrier and a broadcast) or 10^6 calls; the recording starts 3 s
  # in (start-up and warm-up) and lasts $seconds.
  # shellcheck disable=SC2046 # latency_opts is a word list by design
  timeout 120 "$lab" mpirun -np 2 --map-by node $(latency_opts "$c") \
    "$build/perf/dualrail-allreduce-bench" -m "$size:$size" -i 1000000 -T 4 \
    >"$work/$c.out" 2>&1 &
  job=$!
  sleep 3
  kill -0 "$job" 2>/dev/null || { echo "syscall_timeline.sh: $c ended early:" >&2; tail -n 20 "$work/$c.out" >&2; exit 1; }
  perf record -q -a "${events[@]}" -o "$work/$c.data" -- sleep "$seconds" >/dev/null 2>&1 ||
    { echo "syscall_timeline.sh: perf record failed (tracepoints need root and tracefs)" >&2; exit 1; }
  wait "$job" || { echo "syscall_timeline.sh: $c failed:" >&2; tail -n 20 "$work/$c.out" >&2; exit 1; }
  perf script -i "$work/$c.data" --ns -F comm,tid,time,event 2>/dev/null >"$work/$c.txt"
  python3 "$root/perf/syscall_timeline.py" "$c" "$work/$c.txt"
done
