#!/usr/bin/env bash
# ucx_workarounds.sh - do this stack's UCX still need ucx_mr's copy-only
# segments? Runs the flapping-plane test under 4 MiB allreduces
# (failover_flap_large: plane A of node 2 down/up every 0.3 s, every result
# checked) RUNS times with ucx_mr's settings (every segment by copy,
# UCX_TCP_{TX,RX}_SEG_SIZE holding a whole segment) and RUNS times with UCX's
# own (UCX_ZCOPY_THRESH=auto, UCX_TCP_TX_SEG_SIZE=8K, UCX_TCP_RX_SEG_SIZE=64K:
# a setting the user gives wins over ucx_mr's), and counts the runs that fail.
# On UCX 1.13 UCX's own settings lose segments or abort in about 3 runs of 10
# (README, Known limitations).
#
#   perf/ucx_workarounds.sh BUILD_DIR [RUNS]     (default 8 runs each)
#
# Run it inside the stack to measure: for Debian 13,
#   contrib/stack13.sh run perf/ucx_workarounds.sh build-13
# Needs root (the lab). The lab tests' own prefix of BUILD_DIR is used.
set -euo pipefail
build=${1:?usage: ucx_workarounds.sh BUILD_DIR [RUNS]}
runs=${2:-8}
[[ $runs =~ ^[0-9]+$ ]] && ((runs >= 1 && runs <= 30)) || { echo "RUNS: 1..30" >&2; exit 2; }
cd "$build"
ucx=$(pkg-config --modversion ucx 2>/dev/null || echo '?')
declare -A fails
for mode in ucx_mr stock; do
  fails[$mode]=0
  for ((i = 1; i <= runs; i++)); do
    if [[ $mode == stock ]]; then
      env=(UCX_ZCOPY_THRESH=auto UCX_TCP_TX_SEG_SIZE=8K UCX_TCP_RX_SEG_SIZE=64K)
    else
      env=()
    fi
    log=$(mktemp)
    if env "${env[@]}" timeout 300 ctest -R '^failover_flap_large$' --output-on-failure >"$log" 2>&1; then
      echo "$mode run $i: pass"
    else
      fails[$mode]=$((fails[$mode] + 1))
      why=$(grep -m1 -E "Assertion|FAIL|fail:|not exact|slower|exited|Timeout" "$log" || true)
      echo "$mode run $i: FAIL ${why:0:200}"
    fi
    rm -f "$log"
  done
done
echo "UCX $ucx: ucx_mr's settings failed ${fails[ucx_mr]} of $runs runs, UCX's own ${fails[stock]} of $runs"
