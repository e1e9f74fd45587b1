# shellcheck shell=bash
# Sourced by the benchmark scripts that run MPI jobs on the lab (perf/*_compare.sh,
# perf/failover_timeline.sh, perf/unequal_planes.sh): the checks every one of them
# makes before it builds a lab.

# perf_build NAME ROOT [FILE...]: needs root; sets build (DUALRAIL_BUILD_DIR, default
# ROOT/build, made absolute) and checks that the component and each FILE (relative to
# the build tree) exist. Exits 1 with NAME's message otherwise.
perf_build() {
  local name=$1 root=$2 f
  shift 2
  [ "$(id -u)" -eq 0 ] || { echo "$name: needs root (the lab)" >&2; exit 1; }
  build=${DUALRAIL_BUILD_DIR:-build}
  [[ $build == /* ]] || build=$root/$build
  for f in mpi_coll/mca_coll_dualrail.so "$@"; do
    [ -e "$build/$f" ] || { echo "$name: $build/$f missing: build first (cmake --build $build)" >&2; exit 1; }
  done
}

# round_order K NAME...: the names in their order for an odd round K, reversed for an even
# one, so that in interleaved rounds no configuration always runs in the same place (seen:
# the one always run last in latency_compare.sh's rounds came out 12-29 % slower than its
# twin at every size, which alternating the two showed to be its place, not its code).
round_order() {
  local k=$1 i
  shift
  local a=("$@")
  if [ $((k % 2)) = 1 ]; then
    echo "${a[@]}"
  else
    for ((i = ${#a[@]} - 1; i >= 0; i--)); do printf '%s ' "${a[i]}"; done
    echo
  fi
}

# perf_need_gnuplot NAME: say once that there will be no plot (the figures still come).
perf_need_gnuplot() {
  command -v gnuplot >/dev/null ||
    echo "$1: gnuplot not found (apt-get install gnuplot-nox): no plot" >&2
}

# The loops of perf/failover_timeline.c (dualrail-failover-timeline) as background jobs, for
# the scripts that change the lab under a running loop. They use the caller's lab, bench,
# bytes, nodes and work, and stamp (contrib/lib/schedule.sh).

# timeline_run NAME SECONDS [mpirun options]: the job's stamped output in $work/NAME.log, in
# the background; its pid in job.
timeline_run() {
  local name=$1 secs=$2
  shift 2
  { timeout -k 10 $((${secs%.*} + 120)) "$lab" mpirun -np "$nodes" --map-by node \
      --mca coll_dualrail_priority 100 "$@" "$bench" ${timeline_args[@]+"${timeline_args[@]}"} --bytes "$bytes" --seconds "$secs" 2>&1
    echo "JOB-EXIT $?"; } | stamp >"$work/$name.log" &
  job=$!
}

# timeline_start LOG: the loop's start epoch, waiting for it (bounded: 90 s, or the job's end).
timeline_start() {
  local t
  for _ in $(seq 1 900); do
    t=$(sed -n 's/^[0-9.]* # failover_timeline: start \([0-9.]*\) .*/\1/p' "$1" | head -1)
    [ -n "$t" ] && { echo "$t"; return 0; }
    grep -q "JOB-EXIT" "$1" && break
    sleep 0.1
  done
  return 1
}

# timeline_ok NAME LOG: wait for the job; exit 1 (NAME's message, the log's tail) unless it
# ended with status 0 and every result exact.
timeline_ok() {
  wait "$job" || true
  if ! grep -q "JOB-EXIT 0" "$2" || ! grep -q "every result exact" "$2"; then
    echo "$1: the job failed:" >&2
    cut -d' ' -f2- "$2" | tail -n 30 >&2
    exit 1
  fi
}

# The scripts that run dualrail-mr-latency (ucx_mr alone) between lab nodes 0 and 1:
# perf/peer_scaling.sh, perf/small_plane.sh.

# mr_latency_builds NAME ROOT [BASELINE]: builds=(this build [BASELINE]), each checked by
# perf_build for perf/dualrail-mr-latency.
mr_latency_builds() {
  local name=$1 root=$2 base=${3:-}
  builds=()
  if [ -n "$base" ]; then
    DUALRAIL_BUILD_DIR=$base perf_build "$name" "$root" perf/dualrail-mr-latency
    builds+=("$build")
  fi
  perf_build "$name" "$root" perf/dualrail-mr-latency
  builds=("$build" ${builds[@]+"${builds[@]}"})
}

# mr_latency_lab ROOT TAG: a 2-node lab (prefix DUALRAIL_LAB_PREFIX, drTAG if unset) and a
# work directory, both removed at exit; sets lab and work.
mr_latency_lab() {
  export DUALRAIL_LAB_PREFIX=${DUALRAIL_LAB_PREFIX:-dr$2}
  lab=$1/contrib/lab.sh
  work=$(mktemp -d "/tmp/dualrail-$2-XXXXXX")
  trap '"$lab" down >/dev/null 2>&1 || true; rm -rf "$work"' EXIT
  "$lab" up --nodes 2 >/dev/null
}

# mr_latency_run BUILD SIZE ITERS IDLE W0 W1: one run of the exchange between nodes 0 and 1
# on both planes, node 0 registering IDLE idle peers and weighing its planes W0, node 1 W1
# (dualrail-mr-latency's arguments); us per iteration on stdout, empty on failure. Both
# processes run under timeout.
mr_latency_run() {
  local bin=$1/perf/dualrail-mr-latency dir peer
  dir=$(mktemp -d "$work/oob-XXXXXX")
  timeout 90 "$lab" exec 1 "$bin" "$dir" 1 0 ethA,ethB "$2" "$3" exchange 0 "$6" \
    >"$dir/peer.log" 2>&1 &
  peer=$!
  timeout 90 "$lab" exec 0 "$bin" "$dir" 0 1 ethA,ethB "$2" "$3" exchange "$4" "$5" \
    2>"$dir/self.err" | awk '{print $2}'
  wait "$peer" || true
}
