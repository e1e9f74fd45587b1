# shellcheck shell=bash
# Sourced by perf/latency_compare.sh and perf/syscall_timeline.sh: the mpirun options of
# each small-message configuration, so that both measure the same runs.
#
# The benchmark's barrier and stop-flag broadcast between calls stay with the previous
# component, as in the stock and "before" runs, so that only the allreduce differs (a
# barrier's exit skew lands in the timed call). Under the component that previous path is
# the ob1-tcp run's own (pml ob1, btl tcp over both planes): left to the lab's default it
# ran over the management network (btl tcp on ethM), a different path from every stock
# run's, and the dualrail runs read 1-3 us slower at every small size for it (5 interleaved
# runs each, 8 B .. 2 KiB: 22-27 us on ethM, 20-22 us on the planes). dualrail-2u is
# dualrail-2 beside pml ucx instead (the ucx run's point-to-point, as on a cluster whose MPI
# runs pml ucx), so that each dualrail run has a stock run with the same barrier: that
# barrier decides when each rank starts the timed call (perf/syscall_timeline.sh).
#
# dualrail-2a is dualrail-2u with the component's defaults: the benchmark's barrier and
# broadcast on coll/dualrail too, as a site that selects the component runs every
# collective; its barrier is then not the stock run's, so it has no paired run and the
# targets leave it out (perf/latency_compare.sh shows it beside ucx).
#
# floor-c is the ucx run with perf/floor_coll.c preloaded: its 2-rank small allreduces on a
# UCP worker and connection of their own on plane A, nothing else (the collective's floor in
# its own position, beside the stock barrier; needs $DUALRAIL_BUILD_DIR's build of it).
#
# latency_opts NAME: the mpirun options of configuration NAME (dualrail-1, dualrail-2,
# dualrail-2u, dualrail-2a, ob1-tcp, ucx, floor-c; before is dualrail-2 from another build),
# as words.
latency_dr_coll=(--mca coll_dualrail_priority 100 --mca coll_dualrail_barrier 0 --mca coll_dualrail_bcast 0)
latency_ob1=(--mca pml ob1 --mca btl tcp,self --mca btl_tcp_if_include ethA,ethB)
latency_ucx=(--mca pml ucx --mca pml_ucx_tls any --mca pml_ucx_devices any -x UCX_NET_DEVICES=ethA,ethB)
latency_opts() {
  case "$1" in
    dualrail-1) echo "${latency_dr_coll[*]} ${latency_ob1[*]} --mca coll_dualrail_planes ethA" ;;
    dualrail-2|before) echo "${latency_dr_coll[*]} ${latency_ob1[*]} --mca coll_dualrail_planes ethA,ethB" ;;
    dualrail-2u) echo "${latency_dr_coll[*]} ${latency_ucx[*]} --mca coll_dualrail_planes ethA,ethB" ;;
    dualrail-2a) echo "--mca coll_dualrail_priority 100 ${latency_ucx[*]} --mca coll_dualrail_planes ethA,ethB" ;;
    ob1-tcp) echo "${latency_ob1[*]}" ;;
    ucx) echo "${latency_ucx[*]}" ;;
    floor-c) echo "${latency_ucx[*]} -x LD_PRELOAD=${DUALRAIL_BUILD_DIR:-build}/perf/libdualrail_floor_coll.so -x DUALRAIL_FLOOR_DEVICE=ethA" ;;
    *) return 1 ;;
  esac
}
