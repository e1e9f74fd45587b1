# shellcheck shell=bash
# Sourced by the scripts that inject lab faults on a schedule against a running
# job (tests/failover/run_failover.sh, run_staged_failover.sh,
# perf/failover_timeline.sh): wall-clock stamps on output lines, and sleeping
# until an epoch time. Needs bash 5 ($EPOCHREALTIME).

# stdin to stdout, each line prefixed with the epoch time it arrived.
stamp() { while IFS= read -r line; do printf '%s %s\n' "$EPOCHREALTIME" "$line"; done; }

# Sleep until epoch time $1 (at once when it has passed).
sleep_until() {
  sleep "$(awk -v t="$1" -v now="$EPOCHREALTIME" 'BEGIN { d = t - now; if (d < 0) d = 0; printf "%.3f", d }')"
}
