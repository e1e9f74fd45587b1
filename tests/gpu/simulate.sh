#!/bin/bash
# Rehearse tests/gpu/run.sh on this Debian 12 machine as the GPU machine will
# see it: no UCX, hwloc, cmocka, numa, Open MPI, Boost, pkg-config, iproute2
# or make; only what tests/gpu/prepare.sh put into .gpu-deps/. Needs root.
#
#   sudo tests/gpu/simulate.sh                         DR_GPU_SKIP=1 tests/gpu/run.sh
#   sudo DR_CUDA=OFF tests/gpu/simulate.sh             the same without CUDA
#   sudo tests/gpu/simulate.sh bash -c 'ldd ...'       any command in that world
#   sudo DR_SIM_HIDE='libudev1' tests/gpu/simulate.sh  hide more packages (regex)
#
# How: in a private mount namespace, /usr and /etc become overlays (upper
# layer on a tmpfs) and every file of those packages is deleted there, then
# ldconfig rebuilds the loader cache inside the overlay. Nothing outside the
# namespace changes. The GPU itself, nvidia-smi and Ubuntu's libraries and
# compilers cannot be rehearsed here.
set -eu
root=$(cd "$(dirname "$0")/../.." && pwd)
[ "$(id -u)" = 0 ] || { echo "simulate.sh: needs root (mount namespace)" >&2; exit 2; }
# What the GPU machine lacks, as Debian package names (extended regex).
hide='ucx-utils|libucx.*|hwloc|libhwloc.*|libcmocka.*|cmocka-doc|libnuma.*|
      |.*openmpi.*|libpmix.*|libfabric.*|libpsm.*|libevent.*|libibverbs.*|ibverbs-providers|
      |librdmacm.*|libnl-.*|libltdl.*|libboost.*|pkg-config|pkgconf.*|libpkgconf.*|iproute2|make'
hide=$(echo "$hide${DR_SIM_HIDE:+|$DR_SIM_HIDE}" | tr -d ' \n' | sed 's/||/|/g')
pkgs=$(dpkg-query -W -f='${Package}\n' | sed 's/:.*//' | grep -Ex "$hide" | sort -u)
work=$(mktemp -d) # the file list, and the mount point of the overlays' tmpfs
trap 'rm -rf "$work"' EXIT
mkdir "$work/mnt"
# shellcheck disable=SC2086
dpkg -L $pkgs 2>/dev/null | grep -E '^/(usr|etc|lib|lib64|bin|sbin)/' > "$work/all"
while IFS= read -r f; do [ -d "$f" ] && [ ! -L "$f" ] || echo "$f"; done < "$work/all" > "$work/files"
while IFS= read -r f; do [ -d "$f" ] && [ ! -L "$f" ] && echo "$f"; done < "$work/all" |
    sort -r > "$work/dirs" # deepest first
echo "simulate: hiding $(echo "$pkgs" | wc -w) packages ($(wc -l < "$work/files") files)"
[ $# -gt 0 ] || set -- env DR_GPU_SKIP="${DR_GPU_SKIP-1}" "$root/tests/gpu/run.sh"
unshare -m --propagation private bash -c '
    set -e
    work=$1; shift
    t=$work/mnt
    mount -t tmpfs tmpfs "$t"
    for d in usr etc; do
        mkdir -p "$t/$d.u" "$t/$d.w"
        mount -t overlay overlay -o "lowerdir=/$d,upperdir=$t/$d.u,workdir=$t/$d.w" "/$d"
    done
    xargs -d "\n" rm -f < "$work/files"
    # Directories the packages leave empty, and links into what is gone (alternatives: mpicc, mpirun).
    xargs -d "\n" rmdir --ignore-fail-on-non-empty < "$work/dirs" 2>/dev/null || true
    find /usr/bin /usr/sbin /etc/alternatives -xtype l -delete
    ldconfig
    for c in pkg-config pkgconf ip make mpicc mpirun ucx_info hwloc-ls; do
        [ ! -e "/usr/bin/$c" ] && ! command -v "$c" >/dev/null ||
            { echo "simulate: $c still there" >&2; exit 2; }
    done
    set +e
    "$@"
' simulate "$work" "$@"
