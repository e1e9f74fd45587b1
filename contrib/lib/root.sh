# shellcheck shell=bash
# Sourced by the scripts that need root (setup, test, quickstart, stack13,
# package): run as root, they go on; otherwise they run themselves again
# through sudo where sudo is installed (a workstation), and stop with a clear
# message where it is not (a bare Debian machine has no sudo: be root there).

# need_root_or_sudo PROG SCRIPT ARGS...: returns only when already root.
need_root_or_sudo() {
  local prog=$1 script=$2
  shift 2
  [[ $(id -u) -eq 0 ]] && return 0
  if command -v sudo >/dev/null 2>&1; then
    exec sudo --preserve-env=DUALRAIL_CMAKE_ARGS,DUALRAIL_STACK13_ROOT,DUALRAIL_STACK13_TIMEOUT,DUALRAIL_DEBIAN_MIRROR,DUALRAIL_LAB_PREFIX,DUALRAIL_CACHE \
      "$script" "$@"
  fi
  echo "$prog: needs root (network namespaces, chroot, apt-get) and sudo is not installed: run it as root" >&2
  exit 1
}
