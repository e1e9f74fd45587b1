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

# perf_need_gnuplot NAME: say once that there will be no plot (the figures still come).
perf_need_gnuplot() {
  command -v gnuplot >/dev/null ||
    echo "$1: gnuplot not found (apt-get install gnuplot-nox): no plot" >&2
}
