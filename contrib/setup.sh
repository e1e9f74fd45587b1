#!/usr/bin/env bash
# Installs every package DualRail needs to build, test and run the lab, on
# Debian 12 (the host) and Debian 13 (contrib/stack13.sh runs it inside its
# root): the names are the same on both. Idempotent; prints nothing when
# everything is already there. Needs root: not root, it re-runs itself with
# sudo where sudo exists. "setup.sh --list" prints the names and exits.
set -euo pipefail

packages=(
  build-essential cmake pkg-config file
  libucx-dev ucx-utils
  libopenmpi-dev openmpi-bin
  libhwloc-dev hwloc
  libcmocka-dev libboost-program-options-dev
  iproute2 iptables iputils-ping util-linux mount procps
  gnuplot-nox python3
  python3-mpi4py python3-numpy
)
# Open MPI 5's internal headers include <pmix.h> (4.1's do not). On the host,
# test.sh's package step (contrib/package.sh) and the Debian 13 root
# (contrib/stack13.sh) make fresh roots with mmdebstrap.
case $(. /etc/os-release && echo "${VERSION_ID:-}") in
  13*) packages+=(libpmix-dev) ;;
  *) packages+=(mmdebstrap) ;;
esac

if [ "${1:-}" = --list ]; then
  printf '%s\n' "${packages[@]}"
  exit 0
fi

missing=()
for p in "${packages[@]}"; do
  if [[ $(dpkg-query -W -f='${Status}' "$p" 2>/dev/null) != "install ok installed" ]]; then
    missing+=("$p")
  fi
done
here=$(dirname "$(readlink -f "$0")")
if [ ${#missing[@]} -eq 0 ]; then
  exec "$here/ompi_headers.sh"
fi

if [ "$(id -u)" -ne 0 ]; then
  echo "setup.sh: missing packages: ${missing[*]}" >&2
  # shellcheck source=contrib/lib/root.sh
  . "$here/lib/root.sh"
  need_root_or_sudo setup.sh "$here/setup.sh" "$@"
fi
echo "setup.sh: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
"$here/ompi_headers.sh"
