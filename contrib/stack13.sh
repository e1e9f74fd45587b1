#!/usr/bin/env bash
# stack13.sh - the Debian 13 stack (Open MPI 5.0, UCX 1.18) beside the host's
# Debian 12 one: a Debian 13 root made once with mmdebstrap from the archive
# this machine's apt already uses, cached outside the repository, and a way to
# run a command inside it with the repository visible at the same path.
#
#   stack13.sh create        make the root if it is missing, then install
#                            what contrib/setup.sh lists (idempotent)
#   stack13.sh run CMD...    run CMD inside the root, in the current directory
#                            (the repository's root when that is outside it)
#   stack13.sh path          print the root's path
#   stack13.sh help
#
# Environment: DUALRAIL_STACK13_ROOT (default /var/cache/dualrail/trixie),
# DUALRAIL_STACK13_TIMEOUT (seconds the creation may take, default 1500),
# DUALRAIL_DEBIAN_MIRROR (an archive URL instead of the one read from apt's
# configuration).
#
# "run" works in a mount namespace of its own: /proc, /sys, /dev and the
# repository are mounted into the root there and a fresh tmpfs is its /run, so
# nothing is left mounted when the command ends. Network namespaces the command
# makes (contrib/lab.sh) live in that /run: a Debian 13 lab exists only while
# the "run" that built it lasts, and never meets the host's labs.
set -euo pipefail

PROG=stack13.sh
ROOT=${DUALRAIL_STACK13_ROOT:-/var/cache/dualrail/trixie}
SUITE=trixie
TIMEOUT=${DUALRAIL_STACK13_TIMEOUT:-1500}
SELF=$(readlink -f "${BASH_SOURCE[0]}")
REPO=$(dirname "$(dirname "$SELF")")
# Written last by "create": a root without it is incomplete and is remade.
MARK=$ROOT/.dualrail-stack13

die() { echo "$PROG: $*" >&2; exit 1; }

usage() { sed -n '2,23p' "$SELF" | sed 's/^# \{0,1\}//'; }

# shellcheck source=contrib/lib/root.sh
. "$REPO/contrib/lib/root.sh"
need_root() { need_root_or_sudo "$PROG" "$SELF" "$@"; }

# shellcheck source=contrib/lib/apt.sh
. "$REPO/contrib/lib/apt.sh"

mirror() {
    debian_mirror || die "no Debian archive found in /etc/apt/sources.list or /etc/apt/sources.list.d/ (set DUALRAIL_DEBIAN_MIRROR)"
}

# shellcheck source=contrib/lib/chroot.sh
. "$REPO/contrib/lib/chroot.sh"

# The root's mounts (in the caller's private mount namespace) and the repository
# at its own path inside, so absolute paths of a build tree hold in both.
mount_root() {
    chroot_mounts "$ROOT"
    mkdir -p "$ROOT$REPO"
    mount --bind "$REPO" "$ROOT$REPO"
    local b=${DUALRAIL_BUILD_DIR:-}
    if [[ -n $b && $b == /* && $b != "$REPO"/* && -d $b ]]; then
        mkdir -p "$ROOT$b"
        mount --bind "$b" "$ROOT$b"
    fi
}

# Runs "$@" chrooted, with a clean environment: the host's PATH and library
# variables would pick host binaries and libraries. What the project's scripts
# and tests read passes through.
run_inside() {
    local dir=$1
    shift
    local -a envs=(PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
        HOME=/root LANG=C.UTF-8 TERM="${TERM:-dumb}" DUALRAIL_STACK=13)
    local v
    while IFS= read -r v; do
        case $v in
            DUALRAIL_STACK=*) ;;
            DUALRAIL_*|DR_*|OMPI_*|UCX_*|PMIX_*|CTEST_*|CMAKE_*|MAKEFLAGS=*|DEBIAN_FRONTEND=*) envs+=("$v") ;;
        esac
    done < <(env)
    exec chroot "$ROOT" /usr/bin/env -i "${envs[@]}" /bin/bash -c 'cd "$1" && shift && exec "$@"' \
        stack13 "$dir" "$@"
}

cmd_run() {
    [[ $# -ge 1 ]] || die "usage: $PROG run CMD..."
    [[ -f $MARK ]] || die "no complete Debian 13 root at $ROOT: run '$PROG create' first"
    local dir
    dir=$(pwd -P)
    case $dir in
        "$REPO"|"$REPO"/*) ;;
        *) dir=$REPO ;;
    esac
    # The namespace's mounts disappear with it; nothing is unmounted by hand
    # (an unmount could propagate to the host's mounts).
    exec unshare --mount --propagation private -- "$SELF" __inside "$dir" "$@"
}

cmd_inside() {
    local dir=$1
    shift
    mount_root
    run_inside "$dir" "$@"
}

bootstrap() {
    local url tmp
    url=$(mirror)
    command -v mmdebstrap >/dev/null 2>&1 || {
        echo "$PROG: installing mmdebstrap"
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends mmdebstrap >/dev/null ||
            die "cannot install mmdebstrap (apt-get install mmdebstrap)"
    }
    local avail
    avail=$(df -Pk "$(dirname "$ROOT")" | awk 'NR == 2 { print $4 }')
    ((avail > 3 * 1024 * 1024)) || die "less than 3 GiB free under $(dirname "$ROOT"); the root needs about 1.5 GiB"
    tmp=$ROOT.new
    rm -rf --one-file-system "$tmp"
    local -a pkgs
    mapfile -t pkgs < <("$REPO/contrib/setup.sh" --list)
    echo "$PROG: creating the Debian 13 root at $ROOT from $url (takes a few minutes)"
    local t0=$SECONDS rc=0
    timeout "$TIMEOUT" mmdebstrap --quiet --variant=apt \
        --include="$(IFS=,; echo "${pkgs[*]}")" \
        "$SUITE" "$tmp" "$url" >"$tmp.log" 2>&1 || rc=$?
    if ((rc)); then
        tail -20 "$tmp.log" >&2
        rm -rf --one-file-system "$tmp"
        ((rc == 124)) && die "creating the root took more than $TIMEOUT s (DUALRAIL_STACK13_TIMEOUT); log: $tmp.log"
        die "mmdebstrap failed ($rc); log: $tmp.log"
    fi
    rm -rf --one-file-system "$ROOT"
    mv "$tmp" "$ROOT"
    echo "$PROG: root made in $((SECONDS - t0)) s"
}

cmd_create() {
    mkdir -p "$(dirname "$ROOT")"
    # One creator at a time (two test runs starting together).
    exec 9>"$ROOT.lock"
    flock -w "$TIMEOUT" 9 || die "another $PROG create holds $ROOT.lock"
    if [[ ! -f $MARK ]]; then
        bootstrap
    fi
    # setup.sh inside: installs what a newer checkout lists and the root lacks.
    unshare --mount --propagation private -- "$SELF" __inside "$REPO" ./contrib/setup.sh ||
        die "installing packages inside $ROOT failed"
    local v
    v=$(chroot "$ROOT" /bin/sh -c '. /etc/os-release; echo "$VERSION_ID"')
    [[ $v == 13* ]] || die "$ROOT is Debian '$v', not 13"
    date -u +%FT%TZ >"$MARK"
}

main() {
    local cmd=${1:-help}
    [[ $# -gt 0 ]] && shift
    case $cmd in
        create) need_root create "$@"; cmd_create "$@" ;;
        run) need_root run "$@"; cmd_run "$@" ;;
        __inside) cmd_inside "$@" ;;
        path) echo "$ROOT" ;;
        help|-h|--help) usage ;;
        *) usage >&2; die "unknown command '$cmd'" ;;
    esac
}

main "$@"
