#!/usr/bin/env bash
# Failover with device buffers, on the lab: one staged_failover_loop rank per
# lab node (rank i in node i, the host stand-in as the GPU, ucx_mr on ethA and
# ethB), faults injected with lab.sh on a schedule counted from the loop's
# start line.
#
#   run_staged_failover.sh BINARY fault KIND NODE [--plane a|b]
#       plane --plane (default a) of NODE cut (KIND down|blackhole|reset) at
#       --fault-at, healed at --heal-at. Checks: every rank exits 0 with every
#       result exact; NODE's rank counted a failure and a re-admission on that
#       plane and sent bytes on it after the re-admission; no rank counted a
#       failure on the other plane.
#   run_staged_failover.sh BINARY cut KIND NODE [--after-error N]
#       both planes of NODE cut at --fault-at and left cut, peer timeout
#       --peer-timeout. Checks: no rank hangs (all are over within --end-max s
#       of the cut) or crashes (each exits 0 or 3: exact, or an error
#       reported), the first error comes within --error-max s of the cut, no
#       wrong result; with --after-error N (default 3) every rank makes N more
#       calls after the error, and each returns.
#
# Options: --seconds S (loop length; default 12 fault, 40 cut), --fault-at S
#   (3), --heal-at S (6.5), --peer-timeout S (3), --error-max S (8),
#   --end-max S (40), --keep-log FILE.
# Environment: DUALRAIL_LAB_PREFIX (the ctest fixture's lab is drtest).
# Exit status 0 when every check passes; the last line says PASS or FAIL.
set -uo pipefail
export LC_ALL=C

usage() { sed -n '2,/^set -uo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//' >&2; exit 2; }
[ $# -ge 4 ] || usage
bin=$1 mode=$2 kind=$3 node=$4
shift 4
root=$(cd "$(dirname "$0")/../.." && pwd)
lab=$root/contrib/lab.sh
# shellcheck source=contrib/lib/schedule.sh
. "$root/contrib/lib/schedule.sh" # stamp, sleep_until
[ -x "$bin" ] || { echo "run_staged_failover.sh: $bin is not an executable" >&2; exit 2; }
case $mode in fault|cut) ;; *) usage ;; esac
case $kind in down|blackhole|reset) ;; *) usage ;; esac
[[ $node =~ ^[0-9]+$ ]] || usage

plane=a seconds='' fault_at=3 heal_at=6.5 peer_timeout=3 error_max=8 end_max=40 after=3 keep_log=
while [ $# -gt 0 ]; do
  case $1 in
    --plane) plane=${2:?}; shift ;;
    --seconds) seconds=${2:?}; shift ;;
    --fault-at) fault_at=${2:?}; shift ;;
    --heal-at) heal_at=${2:?}; shift ;;
    --peer-timeout) peer_timeout=${2:?}; shift ;;
    --error-max) error_max=${2:?}; shift ;;
    --end-max) end_max=${2:?}; shift ;;
    --after-error) after=${2:?}; shift ;;
    --keep-log) keep_log=${2:?}; shift ;;
    *) echo "run_staged_failover.sh: unknown option $1" >&2; usage ;;
  esac
  shift
done
case $plane in a) pi=0 ;; b) pi=1 ;; *) usage ;; esac
[ -n "$seconds" ] || { [ "$mode" = fault ] && seconds=12 || seconds=40; }
np=$("$lab" nodes) || { echo "run_staged_failover.sh: no lab up"; echo FAIL; exit 1; }
[ "$node" -lt "$np" ] || { echo "run_staged_failover.sh: node $node not in a $np-node lab"; echo FAIL; exit 1; }

work=$(mktemp -d /tmp/dualrail-staged-XXXXXX)
chmod 755 "$work"
log=$work/log
pids=()
cleanup() {
  # Ranks still running (the script was interrupted): end them before healing; the
  # work directory in their command line makes them this run's.
  pkill -f -- "--dir $work/oob" 2>/dev/null || true
  for p in a b; do "$lab" fault "$node" "$p" heal >/dev/null 2>&1 || true; done
  [ -z "$keep_log" ] || cp "$log" "$keep_log" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
for p in a b; do "$lab" fault "$node" "$p" heal >/dev/null 2>&1 || true; done

args=(--size "$np" --dir "$work/oob" --seconds "$seconds")
[ "$mode" = fault ] || args+=(--peer-timeout "$peer_timeout" --after-error "$after")
mkdir -p "$work/oob"
# Whatever happens, no rank outlives this (a hang shows as exit 124).
limit=$(awk -v s="$seconds" -v f="$fault_at" -v e="$end_max" -v m="$mode" \
  'BEGIN { printf "%d", (m == "cut" ? f + e : s) + 60 }')
echo "run_staged_failover.sh: $mode $kind node $node on lab ${DUALRAIL_LAB_PREFIX:-drlab}, $np ranks, device buffers on the stand-in"
for r in $(seq 0 $((np - 1))); do
  { timeout -k 10 "$limit" "$lab" exec "$r" "$bin" --rank "$r" "${args[@]}" 2>&1
    echo "staged_loop: rank $r: EXIT $?"; } | stamp >"$work/rank$r" &
  pids+=($!)
done

t0=
for _ in $(seq 1 600); do
  t0=$(sed -n 's/^[0-9.]* staged_loop: rank 0: start \([0-9.]*\):.*/\1/p' "$work/rank0" | head -1)
  [ -n "$t0" ] && break
  grep -q "EXIT" "$work/rank0" && break
  sleep 0.1
done
fault_t='' events=''
if [ -n "$t0" ]; then
  sleep_until "$(awk -v a="$t0" -v b="$fault_at" 'BEGIN { printf "%.6f", a + b }')"
  fault_t=$EPOCHREALTIME
  if [ "$mode" = fault ]; then
    "$lab" fault "$node" "$plane" "$kind"
    events="fault node $node plane $plane $kind at +$fault_at s"
    sleep_until "$(awk -v a="$t0" -v b="$heal_at" 'BEGIN { printf "%.6f", a + b }')"
    "$lab" fault "$node" "$plane" heal
    events="$events, heal at +$heal_at s"
  else
    "$lab" fault "$node" a "$kind"
    "$lab" fault "$node" b "$kind"
    events="cut node $node planes a and b ($kind) at +$fault_at s"
  fi
fi
wait "${pids[@]}"
sort -n "$work"/rank* >"$log"
cut -d' ' -f2- "$log"
echo "--- schedule (loop start ${t0:-never}): ${events:-none}"

fails=0
fail() { echo "run_staged_failover.sh: FAIL: $*"; fails=$((fails + 1)); }
ok() { echo "run_staged_failover.sh: ok: $*"; }
[ -n "$t0" ] || fail "the loop never started"
if grep -q "WRONG" "$log"; then fail "wrong results: $(grep -m1 'WRONG' "$log" | cut -d' ' -f2-)"; fi
codes=$(sed -n 's/.*staged_loop: rank \([0-9]*\): EXIT \([0-9]*\)$/\1:\2/p' "$log" | sort -n | tr '\n' ' ')
echo "run_staged_failover.sh: exit codes (rank:code): $codes"
plane_counter() { # rank plane field
  sed -n "s/.*staged_loop: rank $1: plane $2: .*\b$3 \([0-9]*\).*/\1/p" "$log" | tail -1
}

if [ "$mode" = fault ]; then
  for r in $(seq 0 $((np - 1))); do
    c=$(sed -n "s/.*staged_loop: rank $r: EXIT \([0-9]*\)$/\1/p" "$log")
    [ "$c" = 0 ] || fail "rank $r exited ${c:-?}"
    grep -q "staged_loop: rank $r: done: .*every result exact" "$log" || fail "rank $r: no clean end"
    other=$(plane_counter "$r" $((1 - pi)) errors)
    [ "${other:-0}" = 0 ] || fail "rank $r: $other failure(s) counted on the plane that was not faulted"
  done
  e=$(plane_counter "$node" "$pi" errors) a=$(plane_counter "$node" "$pi" readmissions) t=$(plane_counter "$node" "$pi" tx_after_readmit)
  echo "run_staged_failover.sh: rank $node, plane $plane: errors ${e:-?}, readmissions ${a:-?}, bytes sent after re-admission ${t:-?}"
  [ "${e:-0}" -ge 1 ] || fail "rank $node never lost plane $plane"
  [ "${a:-0}" -ge 1 ] || fail "rank $node: plane $plane never re-admitted"
  [ "${t:-0}" -gt 0 ] || fail "rank $node: plane $plane carried nothing after its re-admission"
  n=$(grep -Eo "staged_loop: rank 0: done: [0-9]+ iterations" "$log" | grep -Eo "[0-9]+ iterations")
  [ $fails -ne 0 ] || ok "${n:-?} of validated allreduces on device buffers, plane $plane failed over and re-admitted"
else
  for r in $(seq 0 $((np - 1))); do
    c=$(sed -n "s/.*staged_loop: rank $r: EXIT \([0-9]*\)$/\1/p" "$log")
    case $c in
      0|3) ;;
      124|137) fail "rank $r hung (killed after $limit s)" ;;
      *) fail "rank $r exited ${c:-?} (a crash, or a wrong result)" ;;
    esac
  done
  first=$(awk '/staged_loop: rank [0-9]+: ERROR/ { print $1; exit }' "$log")
  if [ -z "$first" ] || [ -z "$fault_t" ]; then
    fail "no rank reported an error"
  else
    d=$(awk -v a="$first" -v b="$fault_t" 'BEGIN { printf "%.2f", a - b }')
    if awk -v d="$d" -v m="$error_max" 'BEGIN { exit !(d >= 0 && d <= m) }'; then
      ok "first error $d s after the cut"
    else
      fail "first error $d s after the cut (bound: 0..$error_max s)"
    fi
    last=$(awk '{ t = $1 } END { print t }' "$log")
    d=$(awk -v a="$last" -v b="$fault_t" 'BEGIN { printf "%.2f", a - b }')
    awk -v d="$d" -v m="$end_max" 'BEGIN { exit !(d <= m) }' && ok "every rank over $d s after the cut" ||
      fail "the ranks took $d s after the cut to end (bound: $end_max s)"
  fi
  for r in $(seq 0 $((np - 1))); do
    n=$(grep -c "staged_loop: rank $r: after-error call" "$log" || true)
    [ "$n" -eq "$after" ] || fail "rank $r returned from $n of $after calls after the error"
  done
  grep -q "staged_loop: rank $node: ERROR" "$log" || fail "the cut rank $node saw no error"
fi
[ $fails -eq 0 ] && { echo PASS; exit 0; }
echo "FAIL ($fails check(s))"
exit 1
