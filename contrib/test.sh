#!/usr/bin/env bash
# Set-up, configure, build and run the tests (ctest) on each supported stack,
# then build its .deb and test it in a fresh root of its release
# (contrib/package.sh):
#   12  the host's Debian 12 (Open MPI 4.1.4, UCX 1.13.1), built into build/
#       (package from build-pkg/): every test
#   13  Debian 13 (Open MPI 5.0.7, UCX 1.18.1) in the root contrib/stack13.sh
#       makes (once, cached) and runs in, built into build-13/ without CUDA
#       (the toolkit is the host's only), packaged from that same tree: every
#       test but those labelled "extended" (failover cases beyond a
#       representative set, see tests/failover/CMakeLists.txt), so that both
#       stacks fit CI's 45 minutes; --full runs those too
# usage: test.sh [--stack 12|13|both] [--full] [--no-package] [CTEST ARGS...]
#        (default: both stacks, Debian 12 first; CTEST ARGS go to both ctest runs)
# Needs root (the lab tests build network namespaces): not root, it runs itself
# through sudo where sudo is installed. Exits non-zero when any stack fails;
# every stack runs even if one fails.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=contrib/lib/root.sh
. "$root/contrib/lib/root.sh"
need_root_or_sudo test.sh "$root/contrib/test.sh" "$@"
cd "$root"

stack=both package=1 full=0
while [[ $# -gt 0 ]]; do
  case $1 in
    --stack) stack=${2:-}; shift 2 || true ;;
    --stack=*) stack=${1#--stack=}; shift ;;
    --no-package) package=0; shift ;;
    --full) full=1; shift ;;
    *) break ;;
  esac
done
case $stack in
  12 | 13 | both) ;;
  *) echo "test.sh: --stack takes 12, 13 or both (got '$stack')" >&2; exit 2 ;;
esac

jobs=$(nproc)
# shellcheck source=contrib/lib/pkg_cmake_args.sh
. "$root/contrib/lib/pkg_cmake_args.sh"

run12() {
  ./contrib/setup.sh
  cmake -S . -B build -DDUALRAIL_WERROR=ON ${DUALRAIL_CMAKE_ARGS:-} >/dev/null
  cmake --build build -j"$jobs"
  (cd build && ctest --output-on-failure --timeout 900 "$@")
}

run13() {
  ./contrib/stack13.sh create
  local -a sel=()
  ((full)) || sel=(-LE extended)
  # Configured as a packaging tree, so package.sh packs it without another build.
  # shellcheck disable=SC2016
  ./contrib/stack13.sh run bash -c '
    set -euo pipefail
    jobs=$1 n=$2; shift 2
    cmake -S . -B build-13 "${@:1:n}" ${DUALRAIL_CMAKE_ARGS:-} >/dev/null
    shift "$n"
    cmake --build build-13 -j"$jobs"
    cd build-13 && ctest --output-on-failure --timeout 900 "$@"' \
    test13 "$jobs" "${#pkg_cmake_args[@]}" "${pkg_cmake_args[@]}" "${sel[@]}" "$@"
}

# What made each failed test fail, from ctest's own log of the run: printed again at the end,
# because CI shows the head of a failed test's output and the tail of the whole run, and a
# test's verdict lines come last in its output.
digest() { # BUILD-DIR
  local t=$1/Testing/Temporary
  [[ -s $t/LastTestsFailed.log && -f $t/LastTest.log ]] || return 0
  local name
  while IFS=: read -r _ name; do
    echo "test.sh: $name failed:"
    awk -v name="$name" '
      $0 ~ "^[0-9]+/[0-9]+ Testing: " { inb = ($3 == name) }
      inb && !/ down: | re-admitted / && /FAIL|[Aa]ssertion|Segmentation|[Aa]borted|core dumped|JOB-EXIT [1-9]|exits [1-9]|error:|Test Failed|Timeout/ {
        if (++k <= 30) print "test.sh:   " $0 }' "$t/LastTest.log"
  done <"$t/LastTestsFailed.log"
}

pkg12() { ./contrib/package.sh --stack 12; }
pkg13() { ./contrib/package.sh --stack 13 --build-dir build-13; }

rc=0
declare -A result
for s in 12 13; do
  [[ $stack == both || $stack == "$s" ]] || continue
  t0=$SECONDS
  echo "test.sh: === Debian $s stack: build and ctest ==="
  if "run$s" "$@"; then
    result[$s]="ctest passed"
    if [[ $s == 13 ]] && ((!full)); then
      result[$s]+=" (label 'extended' left out: --full runs it)"
    fi
  else
    result[$s]="ctest FAILED"
    rc=1
  fi
  result[$s]+=" ($((SECONDS - t0)) s)"
  if ((package)); then
    t0=$SECONDS
    echo "test.sh: === Debian $s stack: package ==="
    if "pkg$s"; then
      result[$s]+=", package passed"
    else
      result[$s]+=", package FAILED"
      rc=1
    fi
    result[$s]+=" ($((SECONDS - t0)) s)"
  fi
done
for s in 12 13; do
  [[ ${result[$s]:-} == "ctest FAILED"* ]] || continue
  echo "test.sh: === Debian $s stack: what failed ==="
  if [[ $s == 12 ]]; then digest build; else digest build-13; fi
done
for s in 12 13; do
  [[ -n ${result[$s]:-} ]] && echo "test.sh: Debian $s stack: ${result[$s]}"
done
exit "$rc"
