#!/bin/sh
# Run on a machine with Debian 12's archive (this one), before tests/gpu/run.sh
# is run on a GPU machine that has nvcc, CMake and a driver but no UCX, hwloc,
# cmocka or package access: downloads their Debian packages and unpacks them
# into .gpu-deps/ (ignored by git; pass it to the device run with carry).
#
#   tests/gpu/prepare.sh            -> .gpu-deps/ (checked to stay under 60 MiB)
#
# The .pc files are rewritten relative to their own directory, so the folder
# works wherever the repository lands. Debian 12 binaries need glibc >= 2.36
# on the GPU machine.
set -eu
root=$(cd "$(dirname "$0")/../.." && pwd)
deps=$root/.gpu-deps
limit_mib=60
# UCX's core libraries need libnuma only; its ib and rdmacm modules also need
# libnl and the verbs providers (libmlx5), which are not carried: UCX skips a
# module that does not load, and these tests use TCP. Without libibverbs here,
# a GPU machine with its own rdma-core loads those modules against its own
# consistent set instead of against a Debian libibverbs that mismatches it.
pkgs="libucx0 libucx-dev libhwloc15 libhwloc-dev libcmocka0 libcmocka-dev libnuma1 libnuma-dev
      pkgconf-bin libpkgconf3"
# libhwloc needs libudev.so.1, which any Ubuntu with apt has (libapt-pkg needs
# it). In case the GPU machine does not, a copy goes to fallback/, which run.sh
# uses only when the machine has none (it must not shadow the system's own).
fallback_pkgs="libudev1"

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
chmod 1777 "$tmp" # apt's download user must be able to write there
cd "$tmp"
mkdir main fallback
chmod 1777 main fallback
updated=""
download() { # dir, packages...: a stale package list (a version gone from the archive) is refreshed once
    dir=$1
    shift
    (cd "$dir" && apt-get download "$@" >/dev/null) && return 0
    [ -z "$updated" ] || return 1
    echo "prepare: apt-get download failed: apt-get update, then once more" >&2
    updated=1
    apt-get update >/dev/null && (cd "$dir" && apt-get download "$@" >/dev/null)
}
# shellcheck disable=SC2086
download main $pkgs
# shellcheck disable=SC2086
download fallback $fallback_pkgs
rm -rf "$deps"
mkdir -p "$deps/fallback"
for deb in main/*.deb; do
    dpkg -x "$deb" "$deps"
done
for deb in fallback/*.deb; do
    dpkg -x "$deb" "$deps/fallback"
done
# Documentation and manuals are not needed to build or run.
for d in "$deps" "$deps/fallback"; do
    rm -rf "$d/usr/share/doc" "$d/usr/share/man" "$d/usr/share/lintian" "$d/usr/share/doc-base"
done
# Absolute /usr in .pc files -> relative to the .pc file (usr/lib/<triplet>/pkgconfig or usr/share/pkgconfig).
for pc in "$deps"/usr/lib/*/pkgconfig/*.pc; do
    [ -e "$pc" ] || continue
    sed -E -i -e 's#(=[[:space:]]*)/usr(/|[[:space:]]*$)#\1${pcfiledir}/../../..\2#' \
        -e 's#-([IL])/usr/#-\1${pcfiledir}/../../../#g' "$pc"
done
for pc in "$deps"/usr/share/pkgconfig/*.pc; do
    [ -e "$pc" ] || continue
    sed -E -i 's#(=[[:space:]]*)/usr(/|[[:space:]]*$)#\1${pcfiledir}/../..\2#' "$pc"
done
# Debian keeps architecture-dependent headers (hwloc/autogen/config.h, which
# hwloc.h includes) in usr/include/<triplet>, a directory the system compiler
# searches by itself; for the unpacked tree the .pc files must name it.
for inc in "$deps"/usr/include/*-linux-gnu*; do
    [ -d "$inc" ] || continue
    t=${inc##*/}
    for pc in "$deps/usr/lib/$t"/pkgconfig/*.pc; do
        if [ -e "$pc" ] && grep -q '^Cflags:' "$pc"; then
            sed -i "s#^Cflags:.*#& -I\${pcfiledir}/../../../include/$t#" "$pc"
        fi
    done
done
ls main/*.deb fallback/*.deb | sed 's|^main/||' > "$deps/PACKAGES"
size=$(du -sm "$deps" | cut -f1)
echo "prepare: $(wc -l < "$deps/PACKAGES") packages unpacked into $deps: ${size} MiB"
if [ "$size" -gt "$limit_mib" ]; then
    echo "prepare: $deps is ${size} MiB, over the ${limit_mib} MiB the device run may carry" >&2
    exit 1
fi
# A device run carries the working tree (tracked and untracked, not ignored,
# files) and .gpu-deps: 64 MiB together at most.
if command -v git >/dev/null && git -C "$root" rev-parse >/dev/null 2>&1; then
    tree=$(cd "$root" && git ls-files -z -co --exclude-standard |
        du -cb --files0-from=- 2>/dev/null | tail -1 | cut -f1)
    total=$(( (${tree:-0} + $(du -sb "$deps" | cut -f1)) / 1048576 + 1 ))
    echo "prepare: working tree and .gpu-deps: about ${total} MiB of the 64 MiB a device run carries"
    if [ "$total" -gt 64 ]; then
        echo "prepare: over the 64 MiB a device run may carry" >&2
        exit 1
    fi
fi
