#!/usr/bin/env bash
# The OSU micro-benchmarks' own validation (-c) of the collectives with coll/dualrail
# selected, on the lab: 4 nodes x 1 rank (--map-by node), coll_dualrail_priority 100,
# planes ethA,ethB; Open MPI's own point-to-point (ob1, btl tcp) and runtime on the
# management network (lab.sh's default; --pt2pt-if changes it). OSU is not part of this
# repository and this script does not build it: point it at an installed OSU 7.4
# (README, "Validation with the OSU micro-benchmarks", says how it was built).
#
#   perf/osu_validate.sh [--osu-dir DIR] [--bench LIST] [--sizes MIN:MAX] [--iters N]
#                        [--warmup N] [--types LIST] [--rate R] [--timeout S]
#                        [--pt2pt-if LIST] [--fault [--fault-node N] [--fault-at-size B]
#                        [--fault-for S]] [--stock] [--keep DIR]
#
#   --osu-dir DIR   the directory holding osu_bcast, osu_allreduce, ... (env OSU_DIR;
#                   default /opt/osu/libexec/osu-micro-benchmarks/mpi/collective; the
#                   blocking and non_blocking sub-directories of an un-installed build
#                   tree are searched too)
#   --bench LIST    comma-separated benchmarks (default: osu_bcast osu_reduce osu_allreduce
#                   osu_allgather osu_allgatherv osu_reduce_scatter osu_reduce_scatter_block
#                   osu_gather osu_scatter osu_alltoall osu_alltoallv osu_iallreduce
#                   osu_barrier)
#   --sizes         OSU's -m (default 1:1048576); --iters / --warmup: OSU's -i / -x
#                   (default 20 / 2; 60 / 2 with --fault); OSU's -u (validation warm-up)
#                   is 1; osu_barrier under --fault makes 300 x --iters barriers
#   --types LIST    OSU's -T, comma-separated (mpi_char, mpi_int, mpi_float, all;
#                   default: OSU's own default, MPI_CHAR); benchmarks that take no -T
#                   (barrier, gather, scatter, ...) run with their default
#   --rate R        cap both planes (lab.sh up --rate); default: uncapped
#   --timeout S     bound of each benchmark's mpirun (default 300 s)
#   --fault         plane A of --fault-node (default 1) black-holed (lab.sh fault N a
#                   blackhole) once the row of size --fault-at-size (default 64) is printed,
#                   healed --fault-for (default 3) seconds later, in every benchmark's run
#   --keep DIR      keep every run's output there
#   --stock         also run each benchmark without coll/dualrail (--mca coll ^dualrail,
#                   no fault) and show the stock verdict beside it
#
# Per benchmark it prints: the validation verdict (OSU's Pass/Fail column, every row of
# every datatype; a job that fails or prints no row is FAILED), the rows and datatypes
# it covered, and whether coll/dualrail ran the benchmark's collective (the per-kind call
# counters every rank prints at communicator free with coll_dualrail_verbose 1: calls run
# on dualrail on each of the 4 ranks). A collective the component does not take (no
# coll_dualrail_<kind> switch in ompi_info --param coll dualrail --level 9 and no calls
# counted) is "not served by dualrail": its OSU verdict is shown but not counted as a
# pass. With --fault also the plane transitions seen (down / re-admitted lines) and
# whether rows were printed after the heal (the fault landed mid-run).
# Exit status: 0 every served benchmark passed; 1 a validation or a job failed, or the
# component was off for a collective it has a switch for; 3 only inconclusive (--fault:
# a run ended before the heal). Uses its own lab (prefix drosu unless
# DUALRAIL_LAB_PREFIX is set), removed at exit. Needs root and a built component.
set -euo pipefail
export LC_ALL=C
root=$(cd "$(dirname "$0")/.." && pwd)
osu_dir=${OSU_DIR:-/opt/osu/libexec/osu-micro-benchmarks/mpi/collective}
benches=osu_bcast,osu_reduce,osu_allreduce,osu_allgather,osu_allgatherv,osu_reduce_scatter,osu_reduce_scatter_block,osu_gather,osu_scatter,osu_alltoall,osu_alltoallv,osu_iallreduce,osu_barrier
sizes=1:1048576 iters='' warmup=2 types='' rate='' limit=300 pt2pt_if=ethM
fault=0 fault_node=1 fault_at_size=64 fault_for=3 keep='' stock=0
while [ $# -gt 0 ]; do
  case "$1" in
    --osu-dir) osu_dir=${2:?}; shift ;;
    --bench) benches=${2:?}; shift ;;
    --sizes) sizes=${2:?}; shift ;;
    --iters) iters=${2:?}; shift ;;
    --warmup) warmup=${2:?}; shift ;;
    --types) types=${2:?}; shift ;;
    --rate) rate=${2:?}; shift ;;
    --timeout) limit=${2:?}; shift ;;
    --pt2pt-if) pt2pt_if=${2:?}; shift ;;
    --fault) fault=1 ;;
    --fault-node) fault_node=${2:?}; shift ;;
    --fault-at-size) fault_at_size=${2:?}; shift ;;
    --fault-for) fault_for=${2:?}; shift ;;
    --keep) keep=${2:?}; shift ;;
    --stock) stock=1 ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "osu_validate.sh: unknown option $1" >&2; exit 2 ;;
  esac
  shift
done
[ -n "$iters" ] || { if [ "$fault" -eq 1 ]; then iters=60; else iters=20; fi; }
for v in "$iters" "$warmup" "$limit" "$fault_node" "$fault_at_size"; do
  [[ $v =~ ^[0-9]+$ ]] || { echo "osu_validate.sh: bad number '$v'" >&2; exit 2; }
done
[[ $fault_for =~ ^[0-9]+(\.[0-9]+)?$ ]] || { echo "osu_validate.sh: bad --fault-for" >&2; exit 2; }

# shellcheck source=contrib/lib/perf.sh
. "$root/contrib/lib/perf.sh" # perf_build
# shellcheck source=contrib/lib/schedule.sh
. "$root/contrib/lib/schedule.sh" # stamp
perf_build osu_validate.sh "$root" # sets build
IFS=, read -r -a blist <<<"$benches"
declare -A bin=()
for b in "${blist[@]}"; do
  for d in "$osu_dir" "$osu_dir/blocking" "$osu_dir/non_blocking"; do
    if [ -x "$d/$b" ]; then bin[$b]=$d/$b; break; fi
  done
  [ -n "${bin[$b]:-}" ] || { echo "osu_validate.sh: $b not found in $osu_dir (--osu-dir, OSU_DIR)" >&2; exit 1; }
done

# The component's per-collective switches (coll_dualrail_<kind>), from ompi_info.
pkglib=/usr/lib/x86_64-linux-gnu/openmpi/lib/openmpi3
[ -d "$pkglib" ] || pkglib=$(ompi_info --parsable --path pkglibdir | sed -n 's/^path:pkglibdir://p' | head -1)
switches=$(OMPI_MCA_mca_base_component_path=$build/mpi_coll:$pkglib ompi_info --parsable \
  --param coll dualrail --level 9 2>/dev/null | sed -n 's/^mca:coll:dualrail:param:coll_dualrail_\([a-z_]*\):value:.*/\1/p' | sort -u)
[ -n "$switches" ] || { echo "osu_validate.sh: ompi_info does not list coll/dualrail from $build/mpi_coll" >&2; exit 1; }
has_switch() { grep -qx "$1" <<<"$switches"; }

export DUALRAIL_LAB_PREFIX=${DUALRAIL_LAB_PREFIX:-drosu} DUALRAIL_BUILD_DIR=$build
lab=$root/contrib/lab.sh
work=$(mktemp -d /tmp/dualrail-osu-XXXXXX)
cleanup() {
  [ "$fault" -eq 0 ] || "$lab" fault "$fault_node" a heal >/dev/null 2>&1 || true
  "$lab" down >/dev/null 2>&1 || true
  if [ -n "$keep" ]; then mkdir -p "$keep"; cp "$work"/* "$keep"/ 2>/dev/null || true; fi
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
up=(--nodes 4)
[ -z "$rate" ] || up+=(--rate "$rate")
"$lab" up "${up[@]}" >/dev/null
np=4

mca=(--mca coll_dualrail_priority 100 --mca coll_dualrail_planes "ethA,ethB"
     --mca coll_dualrail_verbose 1 --mca coll_dualrail_stats 1)
[ "$pt2pt_if" = ethM ] || mca+=(--mca btl_tcp_if_include "$pt2pt_if")
stock_mca=()
[ "$pt2pt_if" = ethM ] || stock_mca+=(--mca btl_tcp_if_include "$pt2pt_if")
osu_args=(-c -u 1 -m "$sizes" -i "$iters" -x "$warmup")
IFS=, read -r -a tlist <<<"$types"
# OSU's rows: "size latency ... Pass|Fail"; "# Datatype: MPI_X." heads each type's table.
# Prints: rows passed failed datatypes first-failure (DATATYPE:SIZE or -).
osu_rows() {
  awk '
    /^# Datatype:/ { dt = $3; sub(/\.$/, "", dt); if (!(dt in seen)) { seen[dt] = 1; dts = dts (dts ? "," : "") dt } next }
    $1 ~ /^[0-9]+$/ && ($NF == "Pass" || $NF == "Fail") {
      n++; if ($NF == "Pass") p++; else { f++; if (ff == "") ff = (dt ? dt : "MPI_CHAR") ":" $1 } }
    END { printf "%d %d %d %s %s\n", n, p, f, dts ? dts : "-", ff ? ff : "-" }' "$1"
}
# stock_verdict BENCH ARGS...: the same run without coll/dualrail (--stock).
stock_verdict() {
  local b=$1 r=0 n p f d ff
  shift
  timeout -k 10 "$limit" "$lab" mpirun -np "$np" --map-by node --mca coll ^dualrail \
    ${stock_mca[@]+"${stock_mca[@]}"} "${bin[$b]}" "$@" >"$work/$b.stock.out" 2>"$work/$b.stock.err" || r=$?
  read -r n p f d ff < <(osu_rows "$work/$b.stock.out")
  if [ "$b" = osu_barrier ]; then
    [ "$r" = 0 ] && echo ran || echo "FAILED(exit $r)"
  elif [ "$r" = 0 ] && [ "$n" -gt 0 ] && [ "$f" -eq 0 ]; then
    echo "passed($p/$n)"
  else
    echo "FAILED(${ff/-/exit $r})"
  fi
}
takes_type() { # OSU 7.4's benchmarks with a -T option (their -h lists it)
  "${bin[$1]}" -h 2>/dev/null | grep -c -- '--type' >/dev/null
}

echo "osu_validate.sh: lab $DUALRAIL_LAB_PREFIX, $np ranks on 4 nodes, OSU in $osu_dir"
echo "osu_validate.sh: mpirun -np $np --map-by node ${mca[*]} BENCH ${osu_args[*]}${types:+ -T ...}"
[ "$fault" -eq 0 ] || echo "osu_validate.sh: fault: node $fault_node plane A black-holed after the $fault_at_size-byte row, healed $fault_for s later"
extra=''
[ "$stock" -eq 0 ] || extra="stock"
[ "$fault" -eq 0 ] || extra="${extra:+$extra | }fault"
printf '%-26s %-10s %-40s %-34s %s\n' benchmark validation "rows (passed/all sizes types)" dualrail "$extra"
fails=0 inconclusive=0
summary=$work/summary
: >"$summary"
for b in "${blist[@]}"; do
  kind=${b#osu_}
  args=("${osu_args[@]}")
  if [ -n "$types" ] && takes_type "$b"; then
    for t in "${tlist[@]}"; do args+=(-T "$t"); done
  fi
  # osu_barrier: no sizes, no validation; under --fault enough barriers to outlast the cut
  [ "$b" != osu_barrier ] || args=(-i "$([ "$fault" -eq 1 ] && echo $((iters * 300)) || echo "$iters")" -x "$warmup")
  out=$work/$b.out err=$work/$b.err log=$work/$b.log
  : >"$err"
  : >"$log"
  { jrc=0
    timeout -k 10 "$limit" "$lab" mpirun -np "$np" --map-by node "${mca[@]}" "${bin[$b]}" "${args[@]}" \
      2>"$err" || jrc=$?
    echo "JOB-EXIT $jrc"; } | stamp >"$log" &
  job=$!
  heal_t='' fnote=''
  if [ "$fault" -eq 1 ]; then
    # Cut once the trigger row is out (bounded by the job's own limit); heal after --fault-for.
    deadline=$((SECONDS + limit + 20))
    while [ $SECONDS -lt $deadline ]; do
      if awk -v s="$fault_at_size" '$2 ~ /^[0-9]+$/ && $2 + 0 >= s && NF >= 3 { f = 1 } END { exit !f }' "$log" ||
         { [ "$b" = osu_barrier ] && grep -q "Avg Latency" "$log"; }; then
        "$lab" fault "$fault_node" a blackhole >/dev/null
        sleep "$fault_for"
        "$lab" fault "$fault_node" a heal >/dev/null
        heal_t=$EPOCHREALTIME
        break
      fi
      grep -q "^[0-9.]* JOB-EXIT" "$log" && break
      sleep 0.05
    done
  fi
  wait "$job" || true
  sed 's/^[0-9.]* //' "$log" | grep -v '^JOB-EXIT' >"$out"
  rc=$(sed -n 's/^[0-9.]* JOB-EXIT \([0-9]*\)$/\1/p' "$log" | tail -1)
  # OSU's rows: "size latency ... Pass|Fail"; "# Datatype: MPI_X." heads each type's table.
  read -r nrows npass nfail dts firstfail < <(osu_rows "$out")
  # The component's counters: "coll/dualrail: rank R: communicator C (cid N): K <kind> call(s),
  # H handed to the previous module", per rank and communicator at its free.
  ranks_on=$(sed -n "s/.*coll\/dualrail: rank \([0-9]*\): communicator .*: \([0-9]*\) $kind call(s), \([0-9]*\) handed to the previous module.*/\1 \2 \3/p" "$err" "$out" |
    awk '{ c[$1] += $2; h[$1] += $3 } END { n = 0; for (r in c) if (c[r] > h[r]) n++; print n }')
  calls=$(sed -n "s/.*coll\/dualrail: rank 0: communicator .*: \([0-9]*\) $kind call(s), \([0-9]*\) handed.*/\1 \2/p" "$err" "$out" |
    awk '{ c += $1; h += $2 } END { printf "%d %d", c, h }')
  disabled=$(grep -h -m1 "coll/dualrail: disabled" "$err" "$out" || true)
  if [ "$ranks_on" -eq "$np" ]; then
    used="yes: rank 0 ${calls% *} calls, ${calls#* } handed"
    served=1
  elif [ "$ranks_on" -gt 0 ]; then
    used="PARTLY: on $ranks_on of $np ranks"
    served=1
  elif has_switch "$kind" || [ "$kind" = allreduce ]; then
    used="NO (coll_dualrail_$kind exists)"
    served=1
  else
    used="not served by dualrail"
    served=0
  fi
  [ -z "$disabled" ] || used="NO: ${disabled#*coll/dualrail: }"
  if [ "$b" = osu_barrier ]; then
    if [ "$rc" = 0 ] && grep -q "^[[:space:]]*[0-9.]\+[[:space:]]*$" "$out"; then verdict=ran; else verdict=FAILED; fi
    rows="latency $(awk '$1 ~ /^[0-9.]+$/ && NF == 1 { print $1 " us" }' "$out" | tail -1)"
  else
    if [ "$rc" = 0 ] && [ "$nrows" -gt 0 ] && [ "$nfail" -eq 0 ]; then verdict=passed; else verdict=FAILED; fi
    smin=$(awk '$1 ~ /^[0-9]+$/ && ($NF == "Pass" || $NF == "Fail") { print $1 }' "$out" | sort -n | head -1)
    smax=$(awk '$1 ~ /^[0-9]+$/ && ($NF == "Pass" || $NF == "Fail") { print $1 }' "$out" | sort -n | tail -1)
    rows="$npass/$nrows ${smin:-?}..${smax:-?} $dts"
    [ "$nfail" -eq 0 ] || rows="$rows first Fail $firstfail"
  fi
  [ "$rc" = 0 ] || rows="$rows (job exit $rc)"
  if [ "$fault" -eq 1 ]; then
    downs=$( (grep -hc "coll/dualrail rank [0-9]*: peer .* plane [0-9]* (.*) down: " "$err" "$out" || true) | awk '{ s += $1 } END { print s + 0 }')
    ups=$( (grep -hc "coll/dualrail rank [0-9]*: peer .* plane [0-9]* (.*) re-admitted after " "$err" "$out" || true) | awk '{ s += $1 } END { print s + 0 }')
    if [ -z "$heal_t" ]; then
      fnote="INCONCLUSIVE: no fault (the job ended first)"
      [ "$served" -eq 0 ] || inconclusive=$((inconclusive + 1))
    else
      after=$(awk -v h="$heal_t" '$1 > h && ($2 ~ /^[0-9]+$/ || $2 ~ /^[0-9.]+$/) && NF >= 2 { n++ } END { print n + 0 }' "$log")
      if [ "$after" -gt 0 ]; then
        fnote="mid-run ($after rows after heal); $downs down, $ups re-admitted"
      else
        fnote="INCONCLUSIVE: healed after the last row; $downs down, $ups re-admitted"
        [ "$served" -eq 0 ] || inconclusive=$((inconclusive + 1))
      fi
    fi
  fi
  if [ "$served" -eq 1 ]; then
    if [ "$verdict" = FAILED ] || [[ $used == NO* ]] || [[ $used == PARTLY* ]]; then fails=$((fails + 1)); fi
  else
    [ "$verdict" = FAILED ] || verdict="($verdict)"
  fi
  snote=''
  [ "$stock" -eq 0 ] || snote=$(stock_verdict "$b" "${args[@]}")
  extra=$snote
  [ -z "$fnote" ] || extra="${extra:+$extra | }$fnote"
  printf '%-26s %-10s %-40s %-34s %s\n' "$b" "$verdict" "$rows" "$used" "$extra" | tee -a "$summary"
  if [ "$verdict" = FAILED ]; then # the command and OSU's failing row; for a served one more
    echo "osu_validate.sh: $b: mpirun -np $np --map-by node ${mca[*]} ${bin[$b]} ${args[*]}" >&2
    grep -E '^# Datatype|Fail' "$out" | head -n 4 | sed 's/^/    /' >&2 || true
    if [ "$served" -eq 1 ]; then
      grep -E '^#' "$out" | sed 's/^/    /' >&2 || true
      grep -v 'coll/dualrail' "$err" | grep -v '^  ' | tail -n 15 | sed 's/^/    /' >&2 || true
    fi
  fi
done
if [ "$fails" -gt 0 ]; then
  echo "osu_validate.sh: FAIL: $fails benchmark(s) served by dualrail failed or ran without it"
  exit 1
fi
if [ "$inconclusive" -gt 0 ]; then
  echo "osu_validate.sh: INCONCLUSIVE: $inconclusive fault run(s) ended before the heal (more --iters)"
  exit 3
fi
echo "osu_validate.sh: PASS: every benchmark served by dualrail validated"
