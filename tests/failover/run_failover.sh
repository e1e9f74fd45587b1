#!/usr/bin/env bash
# Failover inside collectives, on the lab: runs failover_loop (validated
# MPI_Allreduce in a loop, coll/dualrail selected) through lab.sh mpirun and
# injects faults with lab.sh fault on a schedule counted from the loop's start
# (the program prints its start time; mpirun's own start-up is not counted).
# Every line of the job's output is stamped with the wall time it arrived, so
# the checks can order plane transitions against the faults.
#
#   run_failover.sh BINARY fault KIND SIZE NODES [options]
#       KIND down|blackhole|reset, SIZE small|whole|large, NODES e.g. 1 or 1,2:
#       plane A (--plane) of NODES cut at --fault-at, healed at --heal-at.
#       Checks: job exits 0, every result exact, dualrail ran every call, the
#       plane was declared down (within --detect-max s of the fault) only on
#       links that touch a faulted node and only on that plane, every downed
#       link re-admitted after the heal, no allreduce slower than --slow-max,
#       and the per-plane counters (coll_dualrail_stats) agree with the
#       warning lines (failovers = downs, readmits = re-admissions per rank).
#   run_failover.sh BINARY flap SIZE NODE [options]
#       NODE's plane flaps (--flap-down/--flap-up seconds, --flap-count cycles)
#       from --fault-at. Checks: exit 0, every result exact, no rank's VmRSS
#       grows by more than --mem-max-kb (default 4 MiB small, 96 MiB large)
#       between --mem-after and the end, every downed link re-admitted by the
#       end, no allreduce slower than --slow-max, counters agree with lines.
#   run_failover.sh BINARY cut KIND NODE [options]
#       both planes of NODE cut at --fault-at and left cut; MPI_ERRORS_RETURN
#       (--fatal: the default handler) and coll_dualrail_peer_timeout
#       --peer-timeout. Checks: no hang (the job ends within --end-max s of
#       the fault), the first MPI error within --error-max s of the fault,
#       every rank returns; those with an MPI error exit 3, the others 4 (MPI
#       does not promise that every rank sees the error: one whose part was
#       complete before the cut may succeed); a failure message names the
#       cut node and both planes. --continue N: after the error every rank
#       makes N more allreduces (an application that carries on): each must
#       return, exact or with an error, never hang. With --fatal: the job
#       aborts (non-zero exit, no hang) with that message.
#   run_failover.sh BINARY slow [options]
#       a lab of its own (prefix $DR_FAILOVER_SLOW_PREFIX, default drtest2)
#       with plane A at --rate-a, plane B at --rate-b; large allreduces.
#       Checks: exit 0, every result exact, no plane declared down.
#
# Options: --plane a|b (fault, flap; default a), --seconds S (loop length),
#   --fault-at S, --heal-at S, --np N (default: the lab's node count),
#   --mca NAME VALUE (passed on; repeatable), --env NAME=VALUE (mpirun -x),
#   --verbose N (coll_dualrail_verbose, default 1; 3 adds ucx_mr's debug
#   lines), --keep-log FILE (the stamped log), --device (the loop's buffers in
#   the host stand-in's device memory, coll_dualrail_gpu_standin 1; checks
#   that every rank staged them), --thread-lines (with coll_dualrail_progress_thread
#   1 below MPI_THREAD_MULTIPLE: every rank's finalize line says the progress thread
#   printed no line itself, and some rank's that it handed lines to the application's
#   thread), --coll bcast|allgather|allgatherv|reduce|
#   reduce_scatter_block|gather|scatter|alltoall|alltoallv|iallreduce|ialltoall|
#   ireduce_scatter_block (fault, flap and cut: the loop runs that collective
#   instead of MPI_Allreduce, with the same checks, the i-forms started and
#   waited for; cut with --continue: allreduce, iallreduce, alltoall,
#   ialltoall and alltoallv only),
#   and the bounds named above.
# Defaults: fault: 12 s loop, fault at 3 s, heal at 6.5 s; flap: 13 s loop,
#   flapping from 2 s, 0.3 s down / 0.3 s up, 10 cycles; cut: peer timeout 3 s,
#   first error within 8 s, job over within 30 s of the cut; slow: 50mbit /
#   500mbit, 10 s loop.
# Environment: DUALRAIL_LAB_PREFIX (the lab to run on; the ctest fixture's is
#   drtest), DUALRAIL_BUILD_DIR.
# Exit status 0 when every check passes; the last line says PASS or FAIL.
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
[ -x "$bin" ] || { echo "run_failover.sh: $bin is not an executable" >&2; exit 2; }

kind='' size='' nodes='' plane=a
case $mode in
  fault) [ $# -ge 3 ] || usage; kind=$1 size=$2 nodes=$3; shift 3 ;;
  flap) [ $# -ge 2 ] || usage; size=$1 nodes=$2; shift 2 ;;
  cut) [ $# -ge 2 ] || usage; kind=$1 nodes=$2 size=small; shift 2 ;;
  slow) size=large ;;
  *) usage ;;
esac

# Defaults per mode: loop length, schedule, bounds.
seconds=12 fault_at=3 heal_at=6.5 detect_max='' slow_max=3
flap_down=0.3 flap_up=0.3 flap_count=10 mem_after=1.5 mem_max_kb=
peer_timeout=3 error_max=8 end_max=30 fatal=0 np='' verbose=1 after=0 device=0 thread_lines=0
rate_a=50mbit rate_b=500mbit keep_log= coll=allreduce
mca=()
case $mode in
  flap) seconds=13 fault_at=2 ;;
  cut) seconds=40 ;;
  slow) seconds=10 ;;
esac
while [ $# -gt 0 ]; do
  case $1 in
    --plane) plane=${2:?}; shift ;;
    --seconds) seconds=${2:?}; shift ;;
    --fault-at) fault_at=${2:?}; shift ;;
    --heal-at) heal_at=${2:?}; shift ;;
    --detect-max) detect_max=${2:?}; shift ;;
    --slow-max) slow_max=${2:?}; shift ;;
    --flap-down) flap_down=${2:?}; shift ;;
    --flap-up) flap_up=${2:?}; shift ;;
    --flap-count) flap_count=${2:?}; shift ;;
    --mem-after) mem_after=${2:?}; shift ;;
    --mem-max-kb) mem_max_kb=${2:?}; shift ;;
    --peer-timeout) peer_timeout=${2:?}; shift ;;
    --error-max) error_max=${2:?}; shift ;;
    --end-max) end_max=${2:?}; shift ;;
    --fatal) fatal=1 ;;
    --continue) after=${2:?}; shift ;;
    --rate-a) rate_a=${2:?}; shift ;;
    --rate-b) rate_b=${2:?}; shift ;;
    --np) np=${2:?}; shift ;;
    --verbose) verbose=${2:?}; shift ;;
    --mca) mca+=(--mca "${2:?}" "${3:?}"); shift 2 ;;
    --env) mca+=(-x "${2:?}"); shift ;;
    --keep-log) keep_log=${2:?}; shift ;;
    --device) device=1 ;;
    --thread-lines) thread_lines=1 ;;
    --coll) coll=${2:?}; shift ;;
    *) echo "run_failover.sh: unknown option $1" >&2; usage ;;
  esac
  shift
done
# The MPI call the loop makes (messages and carrying on name it); bmpi: a non-blocking one's
# blocking form, which a failure message may name too.
bmpi=
case $coll in
  alltoall) cmpi=MPI_Alltoall ;;
  alltoallv) cmpi=MPI_Alltoallv ;;
  bcast) cmpi=MPI_Bcast ;;
  allgather) cmpi=MPI_Allgather ;;
  allgatherv) cmpi=MPI_Allgatherv ;;
  gather) cmpi=MPI_Gather ;;
  scatter) cmpi=MPI_Scatter ;;
  reduce) cmpi=MPI_Reduce ;;
  reduce_scatter_block) cmpi=MPI_Reduce_scatter_block ;;
  iallreduce) cmpi=MPI_Iallreduce bmpi=MPI_Allreduce ;;
  ialltoall) cmpi=MPI_Ialltoall bmpi=MPI_Alltoall ;;
  ireduce_scatter_block) cmpi=MPI_Ireduce_scatter_block bmpi=MPI_Reduce_scatter_block ;;
  *) cmpi=MPI_Allreduce ;;
esac
# First down after the fault: a single cut is caught within 3 s; a flapping plane only
# once an outage outlasts detection (0.6 s), which a 0.3 s flap does only when TCP's
# retransmission backoff stretches it: anywhere within the flapping, and up to 1 s after
# its end for a stall that began in its last outage (the stall timeout, 0.5 s, the pings'
# interval and the watchdog's looks; seen: 6.12 and 6.18 s after the fault of a 6 s
# flapping, with no call slower than 0.66 s).
if [ -z "$detect_max" ]; then
  if [ "$mode" = flap ]; then
    detect_max=$(awk -v c="$flap_count" -v d="$flap_down" -v u="$flap_up" 'BEGIN { printf "%.1f", c * (d + u) + 1 }')
  else
    detect_max=3
  fi
fi
# Memory bound of the flap check (VmRSS growth from --mem-after to the end, any rank):
# small: no buffer on that path exceeds 32 KiB and a rank's steady RSS is ~22 MB; 4 MiB
# catches a leak of 2 KiB per call or 256 KiB per failover over the run's ~2000 calls and
# ~14 failovers (measured: under 300 kB). large: UCX's eager buffers and pools keep filling
# for the first ~15 s even without faults (measured: up to 20 MB without, 30-66 MB with
# flapping); 96 MiB is a sanity bound against runaway growth only.
if [ -z "$mem_max_kb" ]; then
  if [ "$size" = large ]; then mem_max_kb=98304; else mem_max_kb=4096; fi
fi
case $plane in a|b) ;; *) echo "run_failover.sh: --plane a or b" >&2; exit 2 ;; esac
plane_idx=0; [ "$plane" = b ] && plane_idx=1
IFS=, read -r -a fnodes <<<"$nodes"

work=$(mktemp -d /tmp/dualrail-failover-XXXXXX)
log=$work/log events=$work/events
own_lab=0
cleanup() {
  # Heal whatever this run may have cut, whatever happened to the job.
  if [ "$own_lab" -eq 1 ]; then
    "$lab" down >/dev/null 2>&1 || true
  elif [ "$mode" != slow ]; then
    for n in "${fnodes[@]}"; do
      for p in a b; do "$lab" fault "$n" "$p" heal >/dev/null 2>&1 || true; done
    done
  fi
  if [ -n "$keep_log" ]; then cp "$log" "$keep_log" 2>/dev/null || true; fi
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

if [ "$mode" = slow ]; then
  export DUALRAIL_LAB_PREFIX=${DR_FAILOVER_SLOW_PREFIX:-drtest2}
  own_lab=1
  "$lab" up --nodes 4 --rate-a "$rate_a" --rate-b "$rate_b" >/dev/null ||
    { echo "run_failover.sh: lab $DUALRAIL_LAB_PREFIX did not come up"; echo FAIL; exit 1; }
fi
[ -n "$np" ] || np=$("$lab" nodes) || { echo "run_failover.sh: no lab up"; echo FAIL; exit 1; }
# Start from a clean lab: no fault left over from an earlier run.
if [ "$mode" != slow ]; then
  for n in "${fnodes[@]}"; do
    for p in a b; do "$lab" fault "$n" "$p" heal >/dev/null 2>&1 || true; done
  done
fi

args=(--size "$size" --seconds "$seconds" --mem-after "$mem_after" --coll "$coll")
mca+=(--mca coll_dualrail_priority 100 --mca coll_dualrail_verbose "$verbose" --mca coll_dualrail_stats 1)
if [ "$device" -eq 1 ]; then
  args+=(--device)
  mca+=(--mca coll_dualrail_gpu_standin 1)
fi
if [ "$mode" = cut ]; then
  mca+=(--mca coll_dualrail_peer_timeout "$peer_timeout")
  [ "$fatal" -eq 1 ] || args+=(--errors-return)
  [ "$after" -eq 0 ] || args+=(--after-error "$after")
fi
# Whatever happens, the job cannot outlive the loop by more than this.
limit=$(awk -v s="$seconds" 'BEGIN { printf "%d", s + 90 }')
[ "$mode" != cut ] || limit=$(awk -v f="$fault_at" -v e="$end_max" 'BEGIN { printf "%d", f + e + 30 }')

note() { printf '%s EVENT %s\n' "$EPOCHREALTIME" "$*" >>"$events"; echo "run_failover.sh: $*"; }
: >"$events"
echo "run_failover.sh: $mode ${kind:+$kind }${size:+$size }${nodes:+node(s) $nodes }on lab ${DUALRAIL_LAB_PREFIX:-drlab}, $np ranks"
{ timeout -k 10 "$limit" "$lab" mpirun -np "$np" --map-by node "${mca[@]}" "$bin" "${args[@]}" 2>&1
  echo "JOB-EXIT $?"; } | stamp >"$log" &
job=$!

# The schedule, counted from the start line (bounded wait for it).
t0=
for _ in $(seq 1 600); do
  t0=$(sed -n 's/^[0-9.]* failover_loop: start \([0-9.]*\):.*/\1/p' "$log" | head -1)
  [ -n "$t0" ] && break
  grep -q "JOB-EXIT" "$log" && break
  sleep 0.1
done
fault_t='' heal_t=''
if [ -n "$t0" ]; then
  sleep_until "$(awk -v a="$t0" -v b="$fault_at" 'BEGIN { printf "%.6f", a + b }')"
  fault_t=$EPOCHREALTIME
  case $mode in
    fault)
      for n in "${fnodes[@]}"; do "$lab" fault "$n" "$plane" "$kind"; done
      note "fault: node(s) $nodes plane $plane $kind" ;;
    flap)
      for n in "${fnodes[@]}"; do
        "$lab" fault "$n" "$plane" flap --down "$flap_down" --up "$flap_up" --count "$flap_count"
      done
      note "fault: node(s) $nodes plane $plane flap --down $flap_down --up $flap_up --count $flap_count" ;;
    cut)
      for n in "${fnodes[@]}"; do "$lab" fault "$n" a "$kind"; "$lab" fault "$n" b "$kind"; done
      note "fault: node(s) $nodes planes a and b $kind" ;;
    slow) note "no fault: plane A at $rate_a, plane B at $rate_b" ;;
  esac
  if [ "$mode" = fault ]; then
    sleep_until "$(awk -v a="$t0" -v b="$heal_at" 'BEGIN { printf "%.6f", a + b }')"
    heal_t=$EPOCHREALTIME
    for n in "${fnodes[@]}"; do "$lab" fault "$n" "$plane" heal; done
    note "heal: node(s) $nodes plane $plane"
  fi
fi
wait "$job"
if [ "$mode" = flap ]; then
  for n in "${fnodes[@]}"; do "$lab" fault "$n" "$plane" heal; done
fi
cat "$log" | cut -d' ' -f2-
echo "--- schedule (loop start ${t0:-never})"
cat "$events"

# ------------------------------------------------------------------ checks
fails=0
fail() { echo "run_failover.sh: FAIL: $*"; fails=$((fails + 1)); }
ok() { echo "run_failover.sh: ok: $*"; }
rel() { awk -v t="$1" -v z="$2" 'BEGIN { printf "%.2f", t - z }'; }

rc=$(sed -n 's/^[0-9.]* JOB-EXIT \([0-9]*\)$/\1/p' "$log" | tail -1)
[ -n "$t0" ] || fail "the loop never started"
[ "$rc" != 124 ] && [ "$rc" != 137 ] || fail "the job hung: killed after $limit s"
nstart=$(grep -c "communicator MPI_COMM_WORLD .*allreduce runs on dualrail" "$log" || true)
[ "$nstart" -eq "$np" ] || fail "coll/dualrail ran on $nstart of $np ranks"
if [ "$device" -eq 1 ]; then
  n=$(grep -c "coll/dualrail: rank [0-9]*: staging for device buffers on MPI_COMM_WORLD" "$log" || true)
  [ "$n" -eq "$np" ] || fail "device buffers staged on $n of $np ranks"
fi
if [ "$thread_lines" -eq 1 ]; then
  # "progress thread: ... collective(s) ...; P line(s) printed on it, H handed over"
  tl=$(sed -n 's/.*progress thread: .*; \([0-9]*\) line(s) printed on it, \([0-9]*\) handed over.*/\1 \2/p' "$log")
  n=$(printf '%s\n' "$tl" | grep -c . || true)
  on=$(printf '%s\n' "$tl" | awk '{ s += $1 } END { print s + 0 }')
  handed=$(printf '%s\n' "$tl" | awk '{ s += $2 } END { print s + 0 }')
  if [ "$n" -ne "$np" ]; then
    fail "progress thread's line counts on $n of $np ranks"
  elif [ "$on" -ne 0 ]; then
    fail "$on line(s) printed on the progress thread itself (below MPI_THREAD_MULTIPLE)"
  elif [ "$handed" -eq 0 ]; then
    fail "no line came from the progress thread: nothing checked"
  else
    ok "the progress thread printed nothing itself, $handed line(s) printed for it"
  fi
fi
if grep -q "WRONG RESULT" "$log"; then fail "wrong results: $(grep -m1 'WRONG RESULT' "$log" | cut -d' ' -f2-)"; fi

# Plane transitions: "coll/dualrail rank R: peer P plane I (...) down: ..." / "... re-admitted ..."
trans=$work/trans
# (newer builds name the peer's host after its number: "peer 1 (node1) plane 0")
sed -n 's/^\([0-9.]*\) .*coll\/dualrail rank \([0-9]*\): peer \([0-9]*\)\( ([^)]*)\)\{0,1\} plane \([0-9]*\) (.*) down: .*/\1 down \2 \3 \5/p;
        s/^\([0-9.]*\) .*coll\/dualrail rank \([0-9]*\): peer \([0-9]*\)\( ([^)]*)\)\{0,1\} plane \([0-9]*\) (.*) re-admitted after .*/\1 up \2 \3 \5/p' \
  "$log" >"$trans"
ndown=$(awk '$2 == "down"' "$trans" | wc -l)
nup=$(awk '$2 == "up"' "$trans" | wc -l)
echo "run_failover.sh: $ndown (rank, peer, plane) down transition(s), $nup re-admission(s)"

# The counters (coll_dualrail_stats: each rank's table at finalize) must tell the same story
# as the warning lines: per rank and plane, failovers = downs and readmits = re-admissions.
stats=$work/stats
awk '/coll\/dualrail rank [0-9]+: plane statistics/ { sub(/.*coll\/dualrail rank /, ""); r = $1 + 0; inst = 1; next }
     inst && $2 ~ /^[0-9]+$/ && $3 ~ /^[A-Za-z]/ && NF >= 9 { print r, $2, $3, $7, $8, $9; next }
     inst && $2 != "plane" { inst = 0 }' "$log" >"$stats"
if [ -s "$stats" ]; then
  mism=$(awk 'NR == FNR { if ($2 == "down") d[$3 " " $5]++; else u[$3 " " $5]++; next }
              { k = $1 " " $2
                if ($4 != d[k] + 0 || $6 != u[k] + 0)
                  printf "rank %s plane %s: counters %s failovers %s readmits, lines %d down %d re-admitted; ", $1, $2, $4, $6, d[k], u[k] }' "$trans" "$stats")
  [ -z "$mism" ] || fail "counters and warning lines disagree: $mism"
  fo=$(awk -v pi="$plane_idx" '$2 == pi { f += $4; u += $6; r += $5 } END { printf "%d failover(s), %d re-admission(s), %d segment(s) re-routed", f, u, r }' "$stats")
  echo "run_failover.sh: counters on the faulted plane over all ranks: $fo"
else
  echo "run_failover.sh: note: no plane statistics in the output (coll_dualrail_stats unsupported?)"
fi

# Every downed link re-admitted after its last down (and, with HEAL given, not before it).
check_readmitted() { # [heal epoch]
  awk -v heal="${1:-0}" '
    { k = $3 " " $4 " " $5
      if ($2 == "down") { st[k] = "down"; dt[k] = $1 } else { st[k] = "up"; ut[k] = $1 } }
    END { bad = 0
      for (k in st) {
        split(k, f, " ")
        if (st[k] != "up") { printf "rank %s peer %s plane %s: never re-admitted after its down\n", f[1], f[2], f[3]; bad = 1 }
        else if (heal > 0 && ut[k] < heal - 0.2) { printf "rank %s peer %s plane %s: re-admitted %.2f s before the heal\n", f[1], f[2], f[3], heal - ut[k]; bad = 1 }
      }
      exit bad }' "$trans"
}

case $mode in
  fault|flap)
    [ "$rc" = 0 ] || fail "the job exited $rc"
    grep -Eq "failover_loop: [0-9]+ iterations .*every result exact" "$log" || fail "no clean end of the loop"
    n0=$(grep -c "failover_loop: rank [0-9]* exits 0" "$log" || true)
    [ "$n0" -eq "$np" ] || fail "$n0 of $np ranks exited 0"
    if grep -Eq "MPI_COMM_WORLD \(cid 0\): [0-9]+ $coll call\(s\), 0 handed to the previous module" "$log"; then
      n=$(grep -Ec "MPI_COMM_WORLD \(cid 0\): [0-9]+ $coll call\(s\), 0 handed to the previous module" "$log")
      [ "$n" -eq "$np" ] || fail "only $n of $np ranks ran every $coll on dualrail"
    else
      fail "no rank ran every $coll on dualrail"
    fi
    # Only the faulted plane, only links that touch a faulted node.
    bad=$(awk -v nodes="$nodes" -v pi="$plane_idx" '
      BEGIN { n = split(nodes, a, ","); for (i = 1; i <= n; i++) f[a[i]] = 1 }
      $2 == "down" && ($5 != pi || (!($3 in f) && !($4 in f))) { printf "rank %s peer %s plane %s; ", $3, $4, $5 }' "$trans")
    [ -z "$bad" ] || fail "false failover: down on links the fault does not touch: $bad"
    if [ "$ndown" -eq 0 ]; then
      fail "no failover: the faulted plane was never declared down"
    else
      first=$(awk '$2 == "down" { print $1; exit }' "$trans")
      d=$(rel "$first" "${fault_t:-$first}")
      if awk -v d="$d" -v m="$detect_max" 'BEGIN { exit !(d >= 0 && d <= m) }'; then
        ok "failover: first down $d s after the fault"
      else
        fail "first down $d s after the fault (bound: 0..$detect_max s)"
      fi
      # The faulted nodes' ranks (rank = node with --map-by node) each lost the plane to a peer.
      for n in "${fnodes[@]}"; do
        awk -v n="$n" '$2 == "down" && ($3 == n || $4 == n) { found = 1 } END { exit !found }' "$trans" ||
          fail "node $n: no link of its rank was declared down"
      done
      if why=$(check_readmitted "${heal_t:-}"); then
        last=$(awk '$2 == "up" { t = $1 } END { print t }' "$trans")
        if [ "$mode" = fault ]; then
          ok "every downed link re-admitted, the last $(rel "$last" "${heal_t:-$last}") s after the heal"
        else
          ok "every downed link re-admitted by the end"
        fi
      else
        fail "re-admission: $why"
      fi
    fi
    # The slowest call on any rank (the summary line is rank 0's alone: a rank that waited
    # on a stalled link shows it in its own memory line).
    slowest=$(sed -n "s/.*failover_loop: memory rank [0-9]*:.*slowest $coll \\([0-9.]*\\) s.*/\\1/p" "$log" | sort -g | tail -1)
    if [ -n "$slowest" ]; then
      if awk -v s="$slowest" -v m="$slow_max" 'BEGIN { exit !(s <= m) }'; then
        ok "slowest $coll $slowest s (bound $slow_max s)"
      else
        fail "a $coll took $slowest s (bound $slow_max s)"
      fi
    fi
    if [ "$mode" = flap ]; then
      growth=$(sed -n 's/.*failover_loop: max VmRSS growth \(-\{0,1\}[0-9]*\) kB (rank \([0-9]*\)).*/\1 \2/p' "$log" | tail -1)
      fds=$(sed -n 's/.*failover_loop: memory rank \([0-9]*\):.*open fds \([0-9-]*\) -> \([0-9-]*\);.*/\1 \2 \3/p' "$log" |
        awk '{ d = $3 - $2; if (NR == 1 || d > m) { m = d; r = $1 } } END { if (NR) printf "%d (rank %d)", m, r }')
      [ -z "$fds" ] || echo "run_failover.sh: largest growth of open file descriptors: $fds"
      if [ -z "$growth" ]; then
        fail "no memory report"
      elif [ "${growth% *}" -le "$mem_max_kb" ]; then
        ok "memory: largest VmRSS growth ${growth% *} kB (rank ${growth#* }), bound $mem_max_kb kB"
      else
        fail "memory: VmRSS of rank ${growth#* } grew ${growth% *} kB (bound $mem_max_kb kB)"
      fi
    fi
    ;;
  slow)
    [ "$rc" = 0 ] || fail "the job exited $rc"
    grep -Eq "failover_loop: [0-9]+ iterations .*every result exact" "$log" || fail "no clean end of the loop"
    [ "$ndown" -eq 0 ] || fail "false failover: a slow plane was declared down: $(grep -m1 ' down: ' "$log" | cut -d' ' -f2-)"
    iters=$(sed -n 's/.*failover_loop: \([0-9]*\) iterations.*/\1/p' "$log" | tail -1)
    [ "${iters:-0}" -ge 3 ] || fail "only ${iters:-0} iterations: too few to tell"
    [ "$ndown" -ne 0 ] || ok "no plane declared down in ${iters:-0} iterations"
    ;;
  cut)
    [ -n "$fault_t" ] || fail "no fault injected"
    end=$(awk '/JOB-EXIT/ { print $1 }' "$log" | tail -1)
    e=$(rel "${end:-0}" "${fault_t:-0}")
    awk -v e="$e" -v m="$end_max" 'BEGIN { exit !(e <= m) }' && ok "the job ended $e s after the cut" ||
      fail "the job ended $e s after the cut (bound $end_max s)"
    if [ "$fatal" -eq 1 ]; then
      [ "$rc" != 0 ] || fail "the job exited 0 although a node lost both planes"
      grep -q "MPI_ERRORS_ARE_FATAL" "$log" || fail "no MPI_ERRORS_ARE_FATAL abort message"
    else
      first=$(awk '/failover_loop: rank [0-9]*: MPI error/ { print $1; exit }' "$log")
      if [ -z "$first" ]; then
        fail "no rank got an MPI error"
      else
        d=$(rel "$first" "${fault_t:-$first}")
        awk -v d="$d" -v m="$error_max" 'BEGIN { exit !(d <= m) }' && ok "first MPI error $d s after the cut" ||
          fail "first MPI error $d s after the cut (bound $error_max s)"
      fi
      # A lost peer is MPI_ERR_OTHER (MPI 3.1 has no class for a failed process), never
      # MPI_ERR_INTERN, which reads as a bug in the MPI library.
      bad_class=$(grep "failover_loop: rank [0-9]*: MPI error" "$log" | grep -vc "error class [0-9]* (MPI_ERR_OTHER)" || true)
      [ "$bad_class" -eq 0 ] && ok "every MPI error has class MPI_ERR_OTHER" ||
        fail "$bad_class MPI error(s) not of class MPI_ERR_OTHER: $(grep -m1 "failover_loop: rank [0-9]*: MPI error" "$log" | grep -o "error class [0-9]* ([^)]*)")"
      # MPI does not promise that every rank sees the error: a rank whose part of the
      # collective was complete before the cut (its data in, only acknowledgements lost)
      # may return success. Every rank must return, and those that got an error exit 3.
      n3=$(grep -c "failover_loop: rank [0-9]* exits 3" "$log" || true)
      n4=$(grep -c "failover_loop: rank [0-9]* exits 4" "$log" || true)
      [ "$n3" -ge 1 ] || fail "no rank exited 3 (MPI error)"
      [ $((n3 + n4)) -eq "$np" ] || fail "$((n3 + n4)) of $np ranks exited 3 or 4"
      ne=$(grep -c "failover_loop: rank [0-9]*: MPI error" "$log" || true)
      [ "$ne" -eq "$n3" ] || fail "$ne ranks reported an MPI error but $n3 exited 3"
      [ "$rc" != 0 ] || fail "mpirun exited 0 although ranks exited 3"
      ok "$n3 rank(s) got an MPI error and exited 3, $n4 exited 4; mpirun exited $rc"
      for n in "${fnodes[@]}"; do
        grep -q "failover_loop: rank $n: MPI error" "$log" ||
          echo "run_failover.sh: note: rank $n (the cut node) returned from the failed collective without an error"
      done
      if [ "$after" -gt 0 ]; then
        # Carrying on after the error: every rank returns from every further call.
        na=$(grep -c "failover_loop: rank [0-9]*: after the error, $cmpi $after of $after:" "$log" || true)
        [ "$na" -eq "$np" ] || fail "carrying on after the error: $na of $np ranks returned from all $after further $cmpi calls (a hang?)"
        if grep -q "after the error, $cmpi .*WRONG RESULT" "$log"; then
          fail "carrying on after the error: a wrong result"
        fi
        [ "$na" -ne "$np" ] || ok "carrying on after the error: every rank returned from $after more calls ($(grep -c "after the error, $cmpi .*: exact" "$log" || true) exact results, $(grep -c "after the error, $cmpi .*: MPI error" "$log" || true) errors)"
        if [ "$coll" = alltoall ] || [ "$coll" = ialltoall ]; then
          # Every rank exchanges with the cut node in an alltoall: the first call after the
          # error fails on every rank, also on those whose failed call had completed.
          n1=$(grep -c "failover_loop: rank [0-9]*: after the error, $cmpi 1 of $after: MPI error" "$log" || true)
          [ "$n1" -eq "$np" ] && ok "the first $cmpi after the error failed on every rank" ||
            fail "the first $cmpi after the error failed on $n1 of $np ranks"
        fi
      fi
    fi
    # The failure message names the cut node and both planes: at a peer of the cut node
    # ("peer rank N ... no plane left (plane 0 (ethA): down ...; plane 1 (ethB): down ...)")
    # or at the cut node itself (naming a peer and its own two planes).
    n=${fnodes[0]}
    what=$cmpi
    [ -z "$bmpi" ] || what="($bmpi|$cmpi)"
    pat="$what on MPI_COMM_WORLD failed: .*no plane left \\(plane 0 \\(ethA\\): down.*plane 1 \\(ethB\\): down"
    # Counted, not grep -q: a grep -q that stops at its first match leaves the first grep to
    # die of SIGPIPE on its next write, and pipefail then reports the match as a miss.
    nm=$(grep -E "coll/dualrail: rank [0-9]+: $pat" "$log" | grep -Ec "coll/dualrail: rank $n: |peer rank $n ")
    if [ "${nm:-0}" -gt 0 ]; then
      ok "the failure message names rank $n (or its peer) and planes ethA and ethB"
    else
      fail "no failure message naming rank $n and planes ethA and ethB down"
    fi
    ;;
esac

if [ "$fails" -eq 0 ]; then echo "run_failover.sh: PASS"; exit 0; fi
echo "run_failover.sh: $fails check(s) failed"
echo "run_failover.sh: FAIL"
exit 1
