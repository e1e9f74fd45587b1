#!/usr/bin/env bash
# Installs every Debian 12 package DualRail needs to build, test and run the lab.
# Idempotent; prints nothing when everything is already there. Needs root.
set -euo pipefail

packages=(
  build-essential cmake pkg-config
  libucx-dev ucx-utils
  libopenmpi-dev openmpi-bin
  libhwloc-dev hwloc
  libcmocka-dev libboost-program-options-dev
  iproute2 iptables iputils-ping util-linux procps
  gnuplot-nox python3
  python3-mpi4py python3-numpy
)

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done
[ ${#missing[@]} -eq 0 ] && exit 0

if [ "$(id -u)" -ne 0 ]; then
  echo "setup.sh: missing packages (${missing[*]}); run as root to install them" >&2
  exit 1
fi
echo "setup.sh: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
