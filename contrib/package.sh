#!/usr/bin/env bash
# package.sh - the .deb of each stack, built and tested.
#
#   package.sh [--stack 12|13|both] [--no-test] [--build-dir DIR]
#                                               (default: both, tested)
#
# Per stack: configures a build tree of its own (build-pkg on the host's Debian
# 12, build-pkg-13 inside contrib/stack13.sh's Debian 13 root; --build-dir,
# with one stack, names another, e.g. the test suite's build-13) with
# CMAKE_INSTALL_PREFIX=/usr and without CUDA (no Debian package provides the
# CUDA runtime), builds what the package holds, runs cpack -G DEB and copies
# the .deb to dist/.
#
# The test: a fresh root of that release (mmdebstrap's "apt" variant, kept as a
# tarball under /var/cache/dualrail and unpacked anew for every test, so
# nothing from a build root leaks in), "apt-get install ./dualrail_*.deb" from
# the archive this machine's apt uses (which proves the Depends), then
#   ompi_info | grep dualrail                      the component is listed
#   mpirun -np 2 --mca coll_dualrail_priority 100 allreduce_check --quick
#                                                  with no component path: both
#                                                  ranks run MPI_Allreduce on
#                                                  dualrail, results exact
# allreduce_check (tests/mpi) links only libmpi; it is copied into the root.
# Both ranks on this machine: shared memory between them, coll/dualrail's plane
# on loopback (lo). Needs root.
set -euo pipefail

PROG=package.sh
SELF=$(readlink -f "${BASH_SOURCE[0]}")
REPO=$(dirname "$(dirname "$SELF")")
CACHE=${DUALRAIL_CACHE:-/var/cache/dualrail}
TIMEOUT=${DUALRAIL_STACK13_TIMEOUT:-1500}

die() { echo "$PROG: $*" >&2; exit 1; }

# shellcheck source=contrib/lib/apt.sh
. "$REPO/contrib/lib/apt.sh"
# shellcheck source=contrib/lib/chroot.sh
. "$REPO/contrib/lib/chroot.sh"

# Inside a private mount namespace (re-executed through unshare): mount, chroot, run.
if [[ ${1:-} == __inside ]]; then
    root=$2
    shift 2
    chroot_mounts "$root"
    exec chroot "$root" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root \
        LANG=C.UTF-8 DEBIAN_FRONTEND=noninteractive "$@"
fi

# shellcheck source=contrib/lib/root.sh
. "$REPO/contrib/lib/root.sh"
need_root_or_sudo "$PROG" "$SELF" "$@"

stack=both test=1 build_dir=
while [[ $# -gt 0 ]]; do
    case $1 in
        --stack) stack=${2:-}; shift ;;
        --stack=*) stack=${1#--stack=} ;;
        --no-test) test=0 ;;
        --build-dir) build_dir=${2:-}; shift ;;
        *) die "unknown option '$1' (usage: $PROG [--stack 12|13|both] [--no-test] [--build-dir DIR])" ;;
    esac
    shift
done
case $stack in 12 | 13 | both) ;; *) die "--stack takes 12, 13 or both" ;; esac
[[ -z $build_dir || $stack != both ]] || die "--build-dir needs --stack 12 or 13"
[[ -z $build_dir || $build_dir != /* ]] || die "--build-dir is relative to the repository"

jobs=$(nproc)
# What the package holds, and the test's MPI program.
targets=(mca_coll_dualrail dualrail_ucx_mr dualrail-info dualrail-check allreduce_check)
# shellcheck source=contrib/lib/pkg_cmake_args.sh
. "$REPO/contrib/lib/pkg_cmake_args.sh"
cmake_args=("${pkg_cmake_args[@]}")

# build_cmd BUILD_DIR: the shell command that configures, builds and packs there.
build_cmd() {
    printf 'set -e; cmake -S . -B %q' "$1"
    printf ' %q' "${cmake_args[@]}"
    printf ' >/dev/null && cmake --build %q -j%d --target' "$1" "$jobs"
    printf ' %q' "${targets[@]}"
    printf ' && cd %q && rm -f dualrail_*.deb && cpack -G DEB >/dev/null' "$1"
}

build12() {
    local b=${build_dir:-build-pkg}
    (cd "$REPO" && bash -c "$(build_cmd "$b")") >&2 || return 1
    echo "$REPO/$b"
}

build13() {
    "$REPO/contrib/stack13.sh" create >&2 || return 1
    local b=${build_dir:-build-pkg-13}
    (cd "$REPO" && "$REPO/contrib/stack13.sh" run bash -c "$(build_cmd "$b")") >&2 || return 1
    echo "$REPO/$b"
}

# base_root CODENAME: a tarball of a minimal root of that release (made once).
base_root() {
    local codename=$1 tar=$CACHE/$1-base.tar url
    if [[ ! -s $tar ]]; then
        url=$(debian_mirror) || die "no Debian archive found in apt's configuration (set DUALRAIL_DEBIAN_MIRROR)"
        mkdir -p "$CACHE"
        echo "$PROG: making a minimal $codename root for the package test ($tar)" >&2
        # mmdebstrap picks the format from the name: keep ".tar" at its end
        timeout "$TIMEOUT" mmdebstrap --quiet --variant=apt "$codename" "$tar.new.tar" "$url" >&2 ||
            { rm -f "$tar.new.tar"; die "mmdebstrap $codename failed"; }
        mv "$tar.new.tar" "$tar"
    fi
    echo "$tar"
}

# test_deb CODENAME DEB BUILD_DIR
test_deb() {
    local codename=$1 deb=$2 build=$3 tar root rc=0 out
    tar=$(base_root "$codename")
    root=$(mktemp -d "$CACHE/pkgtest-$codename.XXXXXX")
    tar -C "$root" -xf "$tar"
    mkdir -p "$root/tmp/pkg"
    cp "$deb" "$build/tests/mpi/allreduce_check" "$root/tmp/pkg/"
    cat >"$root/tmp/pkg/test.sh" <<'EOF'
set -e
apt-get update -qq
apt-get install -y -qq --no-install-recommends /tmp/pkg/*.deb >/dev/null
echo "installed: $(dpkg-query -W -f='${Package} ${Version}' dualrail)"
echo "depends: $(dpkg-query -W -f='${Depends}' dualrail)"
dpkg -L dualrail | grep -E "mca_coll_dualrail.so|libdualrail_ucx_mr.so|bin/dualrail-|include/dualrail/ucx_mr.h"
ompi_info 2>/dev/null | grep dualrail
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_hwloc_base_binding_policy=none
# What the launcher makes its processes search (Debian 13: PMIx's plugin directory, where
# the package links the component too; Debian 12: nothing, Open MPI's default). Only
# reported: the job below runs with no component path, as a user's would.
seen=$(timeout 60 mpirun -np 1 printenv OMPI_MCA_mca_base_component_path 2>/dev/null || true)
echo "launcher component path: ${seen:-none, the default of Open MPI}"
for d in $(ompi_info --parsable --path pkglibdir 2>/dev/null | sed -n 's/^path:pkglibdir://p') ${seen//:/ }; do
    ls -l "$d"/mca_coll_dualrail.so 2>/dev/null || echo "no mca_coll_dualrail.so in $d"
done
timeout 300 mpirun -np 2 --oversubscribe --mca pml ob1 --mca btl ^tcp \
    --mca coll_dualrail_priority 100 --mca coll_dualrail_planes lo --mca coll_dualrail_verbose 1 \
    /tmp/pkg/allreduce_check --quick
EOF
    out=$(mktemp)
    unshare --mount --propagation private -- "$SELF" __inside "$root" /bin/bash /tmp/pkg/test.sh \
        >"$out" 2>&1 || rc=$?
    rm -rf --one-file-system "$root"
    sed 's/^/    /' "$out"
    local why=""
    ((rc == 0)) || why="exited $rc"
    [[ -n $why ]] || grep -q "MCA coll: dualrail" "$out" || why="ompi_info does not list coll/dualrail"
    [[ -n $why ]] || [[ $(grep -c "communicator MPI_COMM_WORLD .*allreduce runs on dualrail" "$out") -eq 2 ]] ||
        why="coll/dualrail did not run MPI_Allreduce on both ranks"
    # Not anchored at the start: a piece of a stderr line can land in front of it (tests/mpi/verdict.sh)
    [[ -n $why ]] || grep -Eq "[0-9]+ passed, 0 failed$" "$out" || why="allreduce_check did not pass"
    local how
    how=$(sed -n 's/^launcher component path: //p' "$out")
    rm -f "$out"
    if [[ -n $why ]]; then
        echo "$PROG: FAIL: $(basename "$deb") in a fresh $codename root: $why"
        return 1
    fi
    echo "$PROG: pass: $(basename "$deb") installs in a fresh $codename root and runs MPI_Allreduce on dualrail with no component path (the launcher hands out: $how)"
}

rc=0
mkdir -p "$REPO/dist"
for s in 12 13; do
    [[ $stack == both || $stack == "$s" ]] || continue
    codename=bookworm
    [[ $s == 13 ]] && codename=trixie
    t0=$SECONDS
    if ! build=$("build$s"); then
        echo "$PROG: FAIL: building the Debian $s package"
        rc=1
        continue
    fi
    deb=$(ls "$build"/dualrail_*.deb 2>/dev/null | head -1)
    [[ -n $deb ]] || { echo "$PROG: FAIL: cpack made no .deb in $build"; rc=1; continue; }
    cp "$deb" "$REPO/dist/"
    echo "$PROG: dist/$(basename "$deb") ($((SECONDS - t0)) s)"
    if ((test)); then
        t0=$SECONDS
        test_deb "$codename" "$deb" "$build" || rc=1
        echo "$PROG: test of the Debian $s package: $((SECONDS - t0)) s"
    fi
done
exit "$rc"
