#!/usr/bin/env bash
# ucx_workarounds.sh - does this stack's UCX still need one of ucx_mr's UCX
# workarounds? Runs the lab tests that first showed the bug RUNS times with
# the workaround and RUNS times without it, and counts the runs that fail.
#
#   perf/ucx_workarounds.sh [--workaround copy|sever] BUILD_DIR [RUNS]
#                                                 (default copy, 8 runs each)
#
# copy   every segment sent by copy, UCX_TCP_{TX,RX}_SEG_SIZE holding a whole
#        segment; without: UCX's own settings (UCX_ZCOPY_THRESH=auto,
#        UCX_TCP_TX_SEG_SIZE=8K, UCX_TCP_RX_SEG_SIZE=64K: a setting the user
#        gives wins over ucx_mr's). Test: failover_flap_large (plane A of node
#        2 down/up every 0.3 s under 4 MiB allreduces, every result checked).
#        On UCX 1.13 UCX's own settings lost segments or aborted in about 3
#        runs of 10 when the workaround was made.
# sever  a plane declared down has its TCP sockets to the peer shut down
#        before its endpoint is closed (Mr::sever_sockets); without:
#        DUALRAIL_MR_SEVER=0. Tests: lab_failover_stream (a windowed 4 MiB
#        stream through a black hole, a reset and a link down of plane A,
#        each verified and re-admitted) and failover_blackhole_large_two
#        (16 MiB allreduces, plane A of a node black-holed mid-call). On UCX
#        1.13 closing a black-holed endpoint without it crashed the process in
#        uct_tcp_iface_progress when the workaround was made.
#
# A failed run's ctest output is kept as /tmp/ucx_workarounds-WORKAROUND-MODE-RUN.log
# (inside the Debian 13 root's /tmp when run there).
#
# Run it inside the stack to measure: for Debian 13,
#   contrib/stack13.sh run perf/ucx_workarounds.sh build-13
# Needs root (the lab). The lab tests' own prefix of BUILD_DIR is used.
set -euo pipefail
workaround=copy
if [[ ${1:-} == --workaround ]]; then
  workaround=${2:?--workaround copy|sever}
  shift 2
fi
case $workaround in # the tests, and the environment that turns the workaround off
  copy) tests='^failover_flap_large$'
    without=(UCX_ZCOPY_THRESH=auto UCX_TCP_TX_SEG_SIZE=8K UCX_TCP_RX_SEG_SIZE=64K) ;;
  sever) tests='^(lab_failover_stream|failover_blackhole_large_two)$'
    without=(DUALRAIL_MR_SEVER=0) ;;
  *) echo "ucx_workarounds.sh: --workaround copy|sever" >&2; exit 2 ;;
esac
build=${1:?usage: ucx_workarounds.sh [--workaround copy|sever] BUILD_DIR [RUNS]}
runs=${2:-8}
[[ $runs =~ ^[0-9]+$ ]] && ((runs >= 1 && runs <= 30)) || { echo "RUNS: 1..30" >&2; exit 2; }
cd "$build"
ucx=$(pkg-config --modversion ucx 2>/dev/null || echo '?')
declare -A fails
for mode in with without; do
  fails[$mode]=0
  for ((i = 1; i <= runs; i++)); do
    env=()
    [[ $mode == with ]] || env=("${without[@]}")
    log=$(mktemp)
    if env "${env[@]}" timeout 900 ctest -R "$tests" --output-on-failure >"$log" 2>&1; then
      echo "$mode run $i: pass"
    else
      fails[$mode]=$((fails[$mode] + 1))
      why=$(grep -m1 -E "Assertion|Segmentation|FAIL|fail:|not exact|slower|exited|Timeout" "$log" || true)
      echo "$mode run $i: FAIL ${why:0:200}"
      cp "$log" "/tmp/ucx_workarounds-$workaround-$mode-$i.log"
    fi
    rm -f "$log"
  done
done
echo "UCX $ucx, $workaround: with the workaround ${fails[with]} of $runs runs failed, without it ${fails[without]} of $runs"
