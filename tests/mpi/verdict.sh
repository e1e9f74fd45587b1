# shellcheck shell=bash
# Sourced by the run_*.sh scripts of tests/mpi: the verdict of a check program.
#
# verdict_passed FILE [COUNT_RE]: true when FILE holds the line the check programs print
# last on rank 0, "N passed, 0 failed", N matching COUNT_RE (default: any number).
#
# The line must end the line it is on, but need not begin it: mpirun forwards a rank's
# stdout and stderr apart, and an unfinished piece of a stderr line can land in front of the
# next stdout line. Seen with Open MPI 5.0.7's launcher (PRRTE) on Debian 13 in
# mpi_coll_np3/4/5 (rank 0's verdict arrived as "[node0:31364] coll/dualrail: ran39 passed,
# 0 failed", the rest of that stderr line, "k 0: communicator ...", on stderr) and with
# 4.1.4 on Debian 12 when the two streams went to one file. A piece in front cannot turn a
# failure into a pass: ", 0 failed" must end the line, and a count of failures is never
# preceded by anything but ", ".
verdict_passed() {
  local file=$1 count=${2:-}
  [ -n "$count" ] || count="[0-9]+"
  grep -Eq "${count} passed, 0 failed\$" "$file"
}
