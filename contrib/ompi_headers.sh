#!/usr/bin/env bash
# ompi_headers.sh - the Open MPI headers coll/dualrail needs that the installed
# libopenmpi-dev leaves out.
#
# Debian 13's libopenmpi-dev (Open MPI 5.0) ships opal_config.h, which names
# the headers of the threads and timer components built into libopen-pal
# (MCA_*_HEADER "opal/mca/threads/pthreads/threads_pthreads_mutex.h", ...), but
# not those headers; every internal header that takes a lock includes them.
# Debian 12's 4.1 ships the threads headers and lacks only timer_linux.h,
# which nothing the glue includes needs: without a missing threads header this
# script does nothing.
#
# It fetches the source package of exactly the installed version with
# "apt-get source" from the archive apt already uses (a deb-src list of its
# own in a temporary directory: the machine's apt configuration is left as it
# is), and installs the directories of the missing headers under DEST
# (default /usr/local/lib/dualrail/ompi-include, where CMake looks). Nothing
# else of the source is kept. Idempotent: a DEST made for the installed
# version is left alone. Needs root (apt-get, DEST).
set -euo pipefail

PROG=ompi_headers.sh
SELF=$(readlink -f "${BASH_SOURCE[0]}")
REPO=$(dirname "$(dirname "$SELF")")
DEST=${1:-/usr/local/lib/dualrail/ompi-include}
INC=/usr/lib/x86_64-linux-gnu/openmpi/include/openmpi

die() { echo "$PROG: $*" >&2; exit 1; }

[[ -f $INC/opal_config.h ]] || die "no $INC/opal_config.h: install libopenmpi-dev first"

# The headers opal_config.h names and the package lacks.
mapfile -t missing < <(sed -n 's/^#define MCA_[A-Za-z0-9_]*_HEADER "\(.\{1,\}\)"$/\1/p' "$INC/opal_config.h" |
    sort -u | while read -r h; do [[ -f $INC/$h ]] || echo "$h"; done)
need=0
for h in "${missing[@]}"; do [[ $h == opal/mca/threads/* ]] && need=1; done
((need)) || exit 0
# The source version (a binary rebuild's "+b1" is not part of it).
version=$(dpkg-query -W -f='${source:Version}' libopenmpi-dev)
if [[ -f $DEST/.version && $(cat "$DEST/.version") == "$version" ]]; then
    ok=1
    for h in "${missing[@]}"; do [[ -f $DEST/$h ]] || ok=0; done
    ((ok)) && exit 0
fi
if [[ $(id -u) -ne 0 ]]; then
    command -v sudo >/dev/null 2>&1 && exec sudo "$SELF" "$@"
    die "needs root (apt-get, $DEST); run it as root"
fi

# shellcheck source=contrib/lib/apt.sh
. "$REPO/contrib/lib/apt.sh"
mirror=$(debian_mirror) || die "no Debian archive found in apt's configuration (set DUALRAIL_DEBIAN_MIRROR)"
codename=$(. /etc/os-release && echo "$VERSION_CODENAME")
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
chmod 755 "$tmp"
cat >"$tmp/src.sources" <<EOF
Types: deb-src
URIs: $mirror
Suites: $codename
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
EOF
mkdir -p "$tmp/lists/partial" "$tmp/src"
apt_src=(-o Dir::Etc::SourceList="$tmp/src.sources" -o Dir::Etc::SourceParts=/nonexistent
    -o Dir::State::Lists="$tmp/lists" -o APT::Sandbox::User=root)
echo "$PROG: fetching the openmpi $version source package for ${#missing[@]} headers libopenmpi-dev lacks"
timeout 600 apt-get -qq "${apt_src[@]}" update >/dev/null || die "apt-get update of the deb-src list failed"
(cd "$tmp/src" && timeout 600 apt-get -qq "${apt_src[@]}" source --download-only "openmpi=$version" >/dev/null) ||
    die "apt-get source openmpi=$version failed"
orig=$(ls "$tmp"/src/openmpi_*.orig.tar.* 2>/dev/null | head -1)
[[ -n $orig ]] || die "no openmpi orig tarball in the source package"
mapfile -t pats < <(for h in "${missing[@]}"; do echo "*/$(dirname "$h")/*.h"; done | sort -u)
mkdir -p "$tmp/out"
tar xf "$orig" -C "$tmp/out" --strip-components=1 --wildcards "${pats[@]}" ||
    die "the source of openmpi $version lacks the headers its opal_config.h names"
for h in "${missing[@]}"; do [[ -f $tmp/out/$h ]] || die "$h not in the openmpi $version source"; done
echo "$version" >"$tmp/out/.version"
rm -rf "$DEST"
mkdir -p "$(dirname "$DEST")"
cp -r "$tmp/out" "$DEST"
chmod -R a+rX "$DEST"
echo "$PROG: installed $(find "$DEST" -name '*.h' | wc -l) headers under $DEST"
