#!/usr/bin/env bash
# transfer_bench.sh - ucx_mr bandwidth on one plane vs two, on the lab.
#
# Runs dualrail-transfer-bench between lab nodes 0 (client) and 1 (server),
# first with planes=ethA, then with planes=ethA,ethB, each plane capped at
# the same rate (default 1gbit), and prints one table:
#
#   size  one-plane MB/s  two-plane MB/s  ratio
#   ...
#   ratio 1.93            <- last line: two-plane / one-plane at 4 MiB
#
# The lab is its own (prefix drbench unless DUALRAIL_LAB_PREFIX is set). It is
# brought up with --nodes 2 --rate R when it is not up, or re-created when it
# is up with other caps or with faults; it is taken down at exit only when this
# script brought it up. Every process runs under `timeout`.
#
# usage: perf/transfer_bench.sh [--sizes LIST] [--window W] [--rate R]
#                               [--timeout S] [-- EXTRA BENCH ARGS...]
# Environment: DUALRAIL_BUILD_DIR (default build, relative to the repository
# root), DUALRAIL_LAB_PREFIX (default drbench).
set -euo pipefail

PROG=transfer_bench.sh
SELF=$(readlink -f "${BASH_SOURCE[0]}")
REPO=$(dirname "$(dirname "$SELF")")
LAB=$REPO/contrib/lab.sh
export DUALRAIL_LAB_PREFIX=${DUALRAIL_LAB_PREFIX:-drbench}
BUILD=${DUALRAIL_BUILD_DIR:-build}
[[ $BUILD == /* ]] || BUILD=$REPO/$BUILD
BIN=$BUILD/perf/dualrail-transfer-bench

SIZES=64K,1M,4M,16M
WINDOW=8
RATE=1gbit
RUN_TIMEOUT=300      # the benchmark's own deadline, per run
LAB_TIMEOUT=180      # lab.sh up/down
RATIO_SIZE=4194304   # the ratio line is taken at 4 MiB
EXTRA=()

die() { echo "$PROG: $*" >&2; exit 1; }
note() { echo "$PROG: $*" >&2; }

usage() {
    sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "$SELF"
}

while (($#)); do
    case $1 in
        --sizes) [[ $# -ge 2 ]] || die "--sizes needs a value"; SIZES=$2; shift 2 ;;
        --window) [[ $# -ge 2 ]] || die "--window needs a value"; WINDOW=$2; shift 2 ;;
        --rate) [[ $# -ge 2 ]] || die "--rate needs a value"; RATE=$2; shift 2 ;;
        --timeout) [[ $# -ge 2 ]] || die "--timeout needs a value"; RUN_TIMEOUT=$2; shift 2 ;;
        -h|--help) usage; exit 0 ;;
        --) shift; EXTRA=("$@"); break ;;
        *) die "unknown option '$1' (try --help)" ;;
    esac
done
{ [[ $RUN_TIMEOUT =~ ^[0-9]+$ ]] && ((RUN_TIMEOUT > 0)); } || die "bad --timeout '$RUN_TIMEOUT'"

[[ $(id -u) -eq 0 ]] || die "needs root (the lab is made of network namespaces)"
[[ -x $BIN ]] || die "no benchmark binary at $BIN: build it first (cmake --build ${DUALRAIL_BUILD_DIR:-build} --target dualrail-transfer-bench), or set DUALRAIL_BUILD_DIR"
command -v timeout >/dev/null || die "the 'timeout' command is missing (coreutils)"

# Size text -> bytes, as the benchmark parses it (binary K, M, G).
to_bytes() {
    local t=${1^^} n mult=1
    [[ $t =~ ^([0-9]+)(B|K|KB|KIB|M|MB|MIB|G|GB|GIB)?$ ]] || die "bad size '$1' in --sizes"
    n=${BASH_REMATCH[1]}
    case ${BASH_REMATCH[2]} in
        K*) mult=1024 ;; M*) mult=1048576 ;; G*) mult=1073741824 ;;
    esac
    echo $((n * mult))
}
have_ratio_size=0
IFS=, read -r -a size_list <<<"$SIZES"
((${#size_list[@]})) || die "empty --sizes"
for s in "${size_list[@]}"; do
    b=$(to_bytes "$s") || exit 1
    ((b == RATIO_SIZE)) && have_ratio_size=1
done
((have_ratio_size)) || die "--sizes must include 4M (the ratio is reported at 4 MiB)"

# ---------------------------------------------------------------- cleanup

LAB_OWNED=0
SERVER_PID=''
CLIENT_PID=''
TMPDIRS=()
cleanup() {
    local rc=$?
    trap - EXIT INT TERM
    # `timeout` passes the signal on to the benchmark it runs.
    local pid
    for pid in $CLIENT_PID $SERVER_PID; do
        if kill -0 "$pid" 2>/dev/null; then
            kill "$pid" 2>/dev/null || true
            wait "$pid" 2>/dev/null || true
        fi
    done
    local d
    for d in "${TMPDIRS[@]}"; do
        rm -rf "$d"
    done
    if ((LAB_OWNED)); then
        note "taking down lab $DUALRAIL_LAB_PREFIX"
        timeout -k 10 "$LAB_TIMEOUT" "$LAB" down >&2 || note "lab.sh down failed"
    fi
    exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# ---------------------------------------------------------------- the lab

# Is the running lab what this benchmark needs: at least 2 nodes, both planes
# capped at RATE (configured and live on nodes 0 and 1), no faults?
lab_fits() {
    local st want_caps
    st=$(timeout 60 "$LAB" status 2>/dev/null) || return 1
    [[ $st =~ up,\ ([0-9]+)\ nodes ]] && ((BASH_REMATCH[1] >= 2)) || return 1
    want_caps="caps: plane a $RATE, plane b $RATE "
    [[ ${st,,} == *"${want_caps,,}"* ]] || { note "lab $DUALRAIL_LAB_PREFIX is up with other caps"; return 1; }
    [[ $st == *"faults: none"* ]] || { note "lab $DUALRAIL_LAB_PREFIX has faults injected"; return 1; }
    # Live qdiscs: node0 and node1, ethA and ethB, both directions rate-capped.
    local n caps
    for n in 0 1; do
        caps=$(awk -v node="node$n" '
            $1 ~ /^node[0-9]+$/ { cur = $1; next }
            cur == node && ($1 == "ethA" || $1 == "ethB") && $4 ~ /^out=tbf\(/ && $5 ~ /^in=tbf\(/ { k++ }
            END { print k + 0 }' <<<"$st")
        [[ $caps == 2 ]] || { note "lab $DUALRAIL_LAB_PREFIX: node$n planes are not rate-capped"; return 1; }
    done
    return 0
}

if timeout 60 "$LAB" status >/dev/null 2>&1; then
    if lab_fits; then
        note "using lab $DUALRAIL_LAB_PREFIX (already up, caps $RATE)"
    else
        note "re-creating lab $DUALRAIL_LAB_PREFIX with 2 nodes, caps $RATE"
        LAB_OWNED=1
        timeout -k 10 "$LAB_TIMEOUT" "$LAB" up --nodes 2 --rate "$RATE" >&2 ||
            die "lab.sh up failed"
    fi
else
    note "bringing up lab $DUALRAIL_LAB_PREFIX with 2 nodes, caps $RATE"
    LAB_OWNED=1
    timeout -k 10 "$LAB_TIMEOUT" "$LAB" up --nodes 2 --rate "$RATE" >&2 || die "lab.sh up failed"
fi
lab_fits || die "lab $DUALRAIL_LAB_PREFIX does not have the expected caps after up"

# ---------------------------------------------------------------- runs

exit_text() {
    case $1 in
        124|137) echo "exit $1: timed out" ;;
        *) echo "exit $1" ;;
    esac
}

# run_bench PLANES OUTFILE: one client/server pair; the client's table goes to OUTFILE.
run_bench() {
    local planes=$1 out=$2 dir src crc=0 drc=0 kill_after=$((RUN_TIMEOUT + 30))
    dir=$(mktemp -d /tmp/drbench-XXXXXX)
    TMPDIRS+=("$dir")
    local args=(--dir "$dir" --planes "$planes" --sizes "$SIZES" --window "$WINDOW"
                --timeout "$RUN_TIMEOUT" "${EXTRA[@]}")
    note "planes $planes: server in node 1, client in node 0"
    timeout -k 10 "$kill_after" "$LAB" exec 1 "$BIN" --role server "${args[@]}" \
        >"$dir/server.out" 2>"$dir/server.err" &
    SERVER_PID=$!
    # In the background too, so that a signal to this script is handled at once
    # (bash runs traps only between foreground commands).
    timeout -k 10 "$kill_after" "$LAB" exec 0 "$BIN" --role client "${args[@]}" \
        >"$out" 2>"$dir/client.err" &
    CLIENT_PID=$!
    wait "$CLIENT_PID" || crc=$?
    CLIENT_PID=''
    wait "$SERVER_PID" || drc=$?
    SERVER_PID=''
    for src in client server; do
        if [[ -s $dir/$src.err ]]; then
            sed "s/^/  $src: /" "$dir/$src.err" >&2
        fi
    done
    ((crc == 0)) || die "planes $planes: client failed ($(exit_text "$crc"))"
    ((drc == 0)) || die "planes $planes: server failed ($(exit_text "$drc"))"
    grep -q '^# DualRail transfer bandwidth' "$out" || die "planes $planes: no table from the client"
}

RESULTS=$(mktemp -d /tmp/drbench-res-XXXXXX)
TMPDIRS+=("$RESULTS")
run_bench ethA "$RESULTS/one"
run_bench ethA,ethB "$RESULTS/two"

# ---------------------------------------------------------------- table

# Join the two "size MB/s" tables on size.
awk -v ratio_size="$RATIO_SIZE" '
    function txt(n) {
        if (n % 1048576 == 0) return (n / 1048576) "M"
        if (n % 1024 == 0) return (n / 1024) "K"
        return n
    }
    FNR == 1 { f++ }
    /^#/ || NF < 2 { next }
    f == 1 { one[$1] = $2; order[++n] = $1; next }
    f == 2 { two[$1] = $2 }
    END {
        printf "%-8s %15s %15s %7s\n", "size", "one-plane MB/s", "two-plane MB/s", "ratio"
        r = ""
        for (i = 1; i <= n; i++) {
            s = order[i]
            if (!(s in two)) continue
            q = one[s] > 0 ? two[s] / one[s] : 0
            printf "%-8s %15.2f %15.2f %7.2f\n", txt(s), one[s], two[s], q
            if (s == ratio_size) r = sprintf("%.2f", q)
        }
        if (r == "") { print "transfer_bench.sh: no result at 4 MiB" > "/dev/stderr"; exit 1 }
        print "ratio " r
    }' "$RESULTS/one" "$RESULTS/two"
