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
pkgs="libucx0 libucx-dev libhwloc15 libhwloc-dev libcmocka0 libcmocka-dev libnuma1 libnuma-dev
      libibverbs1 librdmacm1 pkgconf-bin libpkgconf3"

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
chmod 1777 "$tmp" # apt's download user must be able to write there
cd "$tmp"
# shellcheck disable=SC2086
apt-get download $pkgs >/dev/null
rm -rf "$deps"
mkdir -p "$deps"
for deb in ./*.deb; do
    dpkg -x "$deb" "$deps"
done
# Documentation and manuals are not needed to build or run.
rm -rf "$deps/usr/share/doc" "$deps/usr/share/man" "$deps/usr/share/lintian" \
       "$deps/usr/share/doc-base"
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
ls ./*.deb | sed 's|^\./||' > "$deps/PACKAGES"
size=$(du -sm "$deps" | cut -f1)
echo "prepare: $(wc -l < "$deps/PACKAGES") packages unpacked into $deps: ${size} MiB"
if [ "$size" -gt "$limit_mib" ]; then
    echo "prepare: $deps is ${size} MiB, over the ${limit_mib} MiB the device run may carry" >&2
    exit 1
fi
