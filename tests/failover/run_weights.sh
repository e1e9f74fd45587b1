#!/usr/bin/env bash
# Striping weights on the lab (issue 12): failover_loop --weights (validated
# 4 MiB / 3 MB allreduces in a loop; every rank prints, after each call, the
# shares of its messages to the next rank read through MPI_T) on a lab of its
# own with plane A at 500 Mbit/s.
#
#   run_weights.sh BINARY unequal [--rate-b 50mbit] [--seconds 12] [--settle 4]
#       plane B capped at --rate-b from the start. Checks: exit 0, every
#       result exact, no plane declared down, and on every rank plane B's
#       share stays within [--lo, --hi] (default: 0.4x to 2.2x its fair share
#       rate_b / (500 + rate_b)) in at least 80 % of the calls that end
#       --settle s or more after the loop start.
#   run_weights.sh BINARY degrade [--seconds 14] [--cut-at 3] [--restore-at 8]
#                  [--cut-rate 250mbit]
#       both planes at 500 Mbit/s; plane B cut to --cut-rate at --cut-at and
#       raised back at --restore-at (tc qdisc change under the running loop).
#       Checks: exit 0, exact, no plane down, and on every rank: a call ending
#       within --cut-within s (2.5) of the cut shows plane B at <= 1.7x its new
#       fair share or half-way from it to 0.5, whichever is lower (0.42 at 250
#       Mbit/s, fair 0.33), and a call ending within
#       --restore-within s (3.5) of the restore shows it at >= 0.38 (fair 0.5;
#       the issue states 2 s and 3 s for the bandwidth, given here half a second
#       of margin for the calls' length). Not 50 Mbit/s: a sudden 5x or 10x cut
#       overflows the shaper's queue and can stall the plane's TCP connection
#       in retransmission backoff for 0.6-2 s, and the watchdog takes it for a
#       black hole, with equal weights as with adaptive ones (README, Known
#       limitations; perf/unequal_planes.sh makes the 10x cut).
#
# Environment: DR_WEIGHTS_PREFIX (the lab's prefix, default drtest3),
# DUALRAIL_BUILD_DIR. Exit status 0 when every check passes; the last line
# says PASS or FAIL.
set -uo pipefail
export LC_ALL=C
usage() { sed -n '2,/^set -uo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//' >&2; exit 2; }
[ $# -ge 2 ] || usage
bin=$1 mode=$2
shift 2
root=$(cd "$(dirname "$0")/../.." && pwd)
lab=$root/contrib/lab.sh
# shellcheck source=contrib/lib/schedule.sh
. "$root/contrib/lib/schedule.sh" # stamp, sleep_until
# shellcheck source=contrib/lib/rate.sh
. "$root/contrib/lib/rate.sh" # plane_rate
[ -x "$bin" ] || { echo "run_weights.sh: $bin is not an executable" >&2; exit 2; }
case $mode in unequal|degrade) ;; *) usage ;; esac
rate_b=50mbit cut_rate=250mbit seconds=12 settle=4 lo='' hi='' cut_at=3 restore_at=8 cut_within=2.5 restore_within=3.5
[ "$mode" = degrade ] && seconds=14
while [ $# -gt 0 ]; do
  case $1 in
    --rate-b) rate_b=${2:?}; shift ;;
    --cut-rate) cut_rate=${2:?}; shift ;;
    --seconds) seconds=${2:?}; shift ;;
    --settle) settle=${2:?}; shift ;;
    --lo) lo=${2:?}; shift ;;
    --hi) hi=${2:?}; shift ;;
    --cut-at) cut_at=${2:?}; shift ;;
    --restore-at) restore_at=${2:?}; shift ;;
    --cut-within) cut_within=${2:?}; shift ;;
    --restore-within) restore_within=${2:?}; shift ;;
    *) echo "run_weights.sh: unknown option $1" >&2; usage ;;
  esac
  shift
done
fair=$(awk -v b="${rate_b%mbit}" 'BEGIN { printf "%.4f", b / (500 + b) }')
[ -n "$lo" ] || lo=$(awk -v f="$fair" 'BEGIN { printf "%.3f", 0.4 * f }')
[ -n "$hi" ] || hi=$(awk -v f="$fair" 'BEGIN { printf "%.3f", 2.2 * f }')

export DUALRAIL_LAB_PREFIX=${DR_WEIGHTS_PREFIX:-drtest3}
nodes=4
work=$(mktemp -d /tmp/dualrail-weights-XXXXXX)
log=$work/log
trap '"$lab" down >/dev/null 2>&1 || true; rm -rf "$work"' EXIT
trap 'exit 130' INT TERM
if [ "$mode" = unequal ]; then
  up=(--rate-a 500mbit --rate-b "$rate_b")
else
  up=(--rate 500mbit)
fi
cut_max=$(awk -v b="${cut_rate%mbit}" 'BEGIN { f = b / (500 + b); m = 1.7 * f; if ((0.5 + f) / 2 < m) m = (0.5 + f) / 2; printf "%.3f", m }')
"$lab" up --nodes "$nodes" "${up[@]}" >/dev/null ||
  { echo "run_weights.sh: lab $DUALRAIL_LAB_PREFIX did not come up"; echo FAIL; exit 1; }

echo "run_weights.sh: $mode on lab $DUALRAIL_LAB_PREFIX: ${up[*]}"
limit=$(awk -v s="$seconds" 'BEGIN { printf "%d", s + 90 }')
{ timeout -k 10 "$limit" "$lab" mpirun -np "$nodes" --map-by node \
    --mca coll_dualrail_priority 100 --mca coll_dualrail_verbose 1 --mca coll_dualrail_stats 1 \
    --mca coll_dualrail_planes ethA,ethB "$bin" --size large --seconds "$seconds" --weights 2>&1
  echo "JOB-EXIT $?"; } | stamp >"$log" &
job=$!
t0=
for _ in $(seq 1 600); do
  t0=$(sed -n 's/^[0-9.]* failover_loop: start \([0-9.]*\):.*/\1/p' "$log" | head -1)
  [ -n "$t0" ] && break
  grep -q "JOB-EXIT" "$log" && break
  sleep 0.1
done
cut_t='' restore_t=''
if [ -n "$t0" ] && [ "$mode" = degrade ]; then
  sleep_until "$(awk -v a="$t0" -v b="$cut_at" 'BEGIN { printf "%.6f", a + b }')"
  cut_t=$EPOCHREALTIME
  plane_rate "$DUALRAIL_LAB_PREFIX" "$nodes" b "$cut_rate"
  echo "run_weights.sh: plane B cut to $cut_rate at $(awk -v a="$cut_t" -v z="$t0" 'BEGIN { printf "%.2f", a - z }') s"
  sleep_until "$(awk -v a="$t0" -v b="$restore_at" 'BEGIN { printf "%.6f", a + b }')"
  restore_t=$EPOCHREALTIME
  plane_rate "$DUALRAIL_LAB_PREFIX" "$nodes" b 500mbit
  echo "run_weights.sh: plane B back at 500mbit at $(awk -v a="$restore_t" -v z="$t0" 'BEGIN { printf "%.2f", a - z }') s"
fi
wait "$job"
grep -v "failover_loop: weights rank" "$log" | cut -d' ' -f2-

fails=0
fail() { echo "run_weights.sh: FAIL: $*"; fails=$((fails + 1)); }
ok() { echo "run_weights.sh: ok: $*"; }
rc=$(sed -n 's/^[0-9.]* JOB-EXIT \([0-9]*\)$/\1/p' "$log" | tail -1)
[ -n "$t0" ] || fail "the loop never started"
[ "$rc" = 0 ] || fail "the job exited ${rc:-?}"
grep -Eq "failover_loop: [0-9]+ iterations .*every result exact" "$log" || fail "no clean end of the loop (results)"
n=$(grep -c "communicator MPI_COMM_WORLD .*allreduce runs on dualrail" "$log" || true)
[ "$n" -eq "$nodes" ] || fail "coll/dualrail ran on $n of $nodes ranks"
if grep -q " down: " "$log"; then
  fail "a plane was declared down: $(grep -m1 ' down: ' "$log" | cut -d' ' -f2-)"
else
  ok "no plane declared down"
fi
# weights rows: rank call end_epoch share0 share1
rows=$work/rows
sed -n 's/^[0-9.]* failover_loop: weights rank \([0-9]*\) call \([0-9]*\) \([0-9.]*\) \([0-9.]*\) \([0-9.]*\)$/\1 \2 \3 \4 \5/p' "$log" >"$rows"
[ -s "$rows" ] || fail "no weights read through MPI_T"
grep -m1 "delivering" "$log" | cut -d' ' -f2- | sed 's/^/run_weights.sh: first weight line: /'
for ((r = 0; r < nodes; r++)); do
  if [ "$mode" = unequal ]; then
    res=$(awk -v r="$r" -v t0="$t0" -v s="$settle" -v lo="$lo" -v hi="$hi" '
      $1 == r && $3 - t0 >= s { n++; if ($5 >= lo && $5 <= hi) k++; sum += $5 }
      END { if (n == 0) print "none"; else printf "%d %d %.3f\n", k, n, sum / n }' "$rows")
    if [ "$res" = none ]; then
      fail "rank $r: no call ended $settle s or more after the start"
    else
      read -r k n mean <<<"$res"
      if [ $((k * 10)) -ge $((n * 8)) ]; then
        ok "rank $r: plane B's share in [$lo, $hi] in $k of $n calls after $settle s (mean $mean, fair $fair)"
      else
        fail "rank $r: plane B's share in [$lo, $hi] in only $k of $n calls after $settle s (mean $mean, fair $fair)"
      fi
    fi
  elif [ -n "$cut_t" ]; then
    c=$(awk -v r="$r" -v c="$cut_t" -v e="$restore_t" -v m="$cut_max" '$1 == r && $3 > c && $3 < e && $5 <= m { printf "%.2f", $3 - c; exit }' "$rows")
    if [ -n "$c" ] && awk -v c="$c" -v m="$cut_within" 'BEGIN { exit !(c <= m) }'; then
      ok "rank $r: plane B's share <= $cut_max $c s after the cut (bound $cut_within s)"
    else
      fail "rank $r: plane B's share reached <= $cut_max ${c:-never} s after the cut (bound $cut_within s)"
    fi
    b=$(awk -v r="$r" -v e="$restore_t" '$1 == r && $3 > e && $5 >= 0.38 { printf "%.2f", $3 - e; exit }' "$rows")
    if [ -n "$b" ] && awk -v b="$b" -v m="$restore_within" 'BEGIN { exit !(b <= m) }'; then
      ok "rank $r: plane B's share >= 0.38 $b s after the restore (bound $restore_within s)"
    else
      fail "rank $r: plane B's share reached >= 0.38 ${b:-never} s after the restore (bound $restore_within s)"
    fi
  fi
done
if [ "$fails" -eq 0 ]; then echo PASS; exit 0; fi
echo FAIL
exit 1
