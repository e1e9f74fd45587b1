# shellcheck shell=bash
# Sourced by the scripts that change a plane's rate under a running job
# (perf/unequal_planes.sh, tests/failover/run_weights.sh): the lab caps a
# plane with a tbf on both ends of each node's leg (lab.sh restore_qdisc);
# this changes both in place, with lab.sh's burst rule (4 ms worth, at least
# 64 KiB), so a running job's connections see only the new rate.

# plane_rate PREFIX NODES PLANE(a|b) RATE(Nmbit): every node's plane capped at RATE.
plane_rate() {
  local prefix=$1 nodes=$2 p=$3 rate=$4 bits burst i
  bits=$(awk -v r="$rate" 'BEGIN { if (sub(/mbit$/, "", r) == 0) exit 1; printf "%.0f", r * 1e6 }') ||
    { echo "plane_rate: rate '$rate' is not N mbit" >&2; return 1; }
  burst=$(awk -v b="$bits" 'BEGIN { x = b / 8 * 0.004; if (x < 65536) x = 65536; printf "%.0f", x }')
  for ((i = 0; i < nodes; i++)); do
    tc -n "$prefix-n$i" qdisc change dev "eth${p^^}" root tbf rate "$rate" burst "$burst" latency 25ms || return 1
    tc -n "$prefix-sw" qdisc change dev "n$i${p^^}" root tbf rate "$rate" burst "$burst" latency 25ms || return 1
  done
}
