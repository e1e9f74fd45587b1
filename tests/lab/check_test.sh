#!/usr/bin/env bash
# shellcheck disable=SC2317  # cleanup runs from the EXIT trap
# dualrail-check on the lab (needs root): passes on a healthy lab; names the
# node and plane of a slow link (one direction, then both), of a mis-cabled
# node (lab.sh up --miscable), of a link that is down; rejects bad options.
# Runs on a lab of its own (prefix drchk) and removes it on exit.
# usage: check_test.sh PATH/TO/dualrail-check
# Last line: "N passed, N failed"; exit status 0 only if all passed.
set -uo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
LAB=$REPO/contrib/lab.sh
CHECK=${1:?usage: check_test.sh PATH/TO/dualrail-check}
export DUALRAIL_LAB_PREFIX=${DUALRAIL_LAB_PREFIX:-drchk}
P=$DUALRAIL_LAB_PREFIX
RATE=200mbit

PASS=0
FAIL=0
ok() { PASS=$((PASS + 1)); echo "PASS: $*"; }
bad() { FAIL=$((FAIL + 1)); echo "FAIL: $*"; }
finish() { echo "$PASS passed, $FAIL failed"; [[ $FAIL -eq 0 ]]; exit $?; }

if [[ $(id -u) -ne 0 ]]; then
    bad "must run as root"
    finish
fi
[[ -x $CHECK ]] || { bad "$CHECK missing"; finish; }

WORK=$(mktemp -d /tmp/check_test.XXXXXX)
cleanup() {
    timeout 60 "$LAB" down >/dev/null 2>&1 || true
    rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

lab() { timeout 120 "$LAB" "$@"; }
# run NAME ARGS...: dualrail-check across the lab, one rank per node; output in $WORK/NAME.
# Other labs may share the two cores: a wide bandwidth tolerance keeps CPU noise from
# counting as a slow link (the slow links below are 90% below the rest).
run() {
    local name=$1
    local -a tol=(--bw-tolerance 0.5)
    shift
    [[ $name == bad* ]] && tol=()
    timeout 240 "$LAB" mpirun -np "$(lab nodes)" --map-by ppr:1:node "$CHECK" "${tol[@]}" "$@" \
        >"$WORK/$name" 2>&1
    RC=$?
    sed -n '/^dualrail-check:/,/^finding\|^OK/p' "$WORK/$name" | sed 's/^/    /'
}
# has NAME PATTERN: the output of run NAME matches the extended regular expression
has() { grep -qE -- "$2" "$WORK/$1"; }
expect_rc() {
    if [[ $RC -eq $2 ]]; then ok "$1: exit $2"; else bad "$1: exit $RC, expected $2"; fi
}
expect() {
    local d=$1 name=$2 pat=$3
    if has "$name" "$pat"; then ok "$d"; else bad "$d: no /$pat/ in the output"; fi
}
expect_not() {
    local d=$1 name=$2 pat=$3
    if has "$name" "$pat"; then bad "$d: /$pat/ in the output"; else ok "$d"; fi
}

# ------------------------------------------------------------ healthy
if ! lab up --nodes 4 --rate "$RATE"; then
    bad "lab up"
    finish
fi
run healthy
expect_rc "healthy lab" 0
expect "healthy: planes discovered, ethM left out" healthy "the MPI runtime's network \(ethM\) left out"
expect "healthy: plane 0 is ethA's subnet" healthy "plane 0  ipv4:10\.209\.1\.0/24 +ethA"
expect "healthy: plane 1 is ethB's subnet" healthy "plane 1  ipv4:10\.209\.2\.0/24 +ethB"
expect "healthy: every pair reachable" healthy "\[reachability\]  ok: 24 directed links"
expect "healthy: planes isolated" healthy "\[isolation\]     ok: 8 ports probed"
expect "healthy: bandwidth within tolerance" healthy "\[bandwidth\]     ok: every link within 50%"
expect "healthy: no findings" healthy "^OK: no findings"

run given --planes ethA,ethB --no-bw
expect_rc "healthy, planes given" 0
expect "healthy, planes given: said so" given "planes given"

# ------------------------------------------------------------ one slow direction
# node2's ethB sends at a tenth of the plane's rate; it receives at full rate.
lab exec 2 tc qdisc replace dev ethB root tbf rate 20mbit burst 64kb latency 25ms
run slow_tx
expect_rc "node2 ethB transmit capped" 1
expect "slow transmit: node and plane named, asymmetric" slow_tx \
    "^finding: node2 plane 1 \(ethB\): transmit slow on all 3 links .*receive normal .*asymmetric"
expect_not "slow transmit: no other node blamed" slow_tx "^finding: node[013]"
expect_not "slow transmit: plane 0 clean" slow_tx "^finding: .*plane 0"
# The adaptive weights for the measured rates name the same node and plane, and only it.
expect "slow transmit: weights put node2's plane 1 at a small share" slow_tx \
    "^  adaptive weights node2 -> node[013]: plane 1 \(ethB\) 0\.[01][0-9] of each message"
expect_not "slow transmit: weights leave the other links even" slow_tx \
    "^  adaptive weights node[013] -> "
lab fault 2 b heal # puts the lab's own cap back

# ------------------------------------------------------------ both directions slow
lab exec 3 tc qdisc replace dev ethA root tbf rate 20mbit burst 64kb latency 25ms
ip netns exec "$P-sw" tc qdisc replace dev n3A root tbf rate 20mbit burst 64kb latency 25ms
run slow_both --no-isolation
expect_rc "node3 ethA capped both ways" 1
expect "slow both ways: node and plane named" slow_both \
    "^finding: node3 plane 0 \(ethA\): slow both ways on all 3 links"
expect_not "slow both ways: plane 1 clean" slow_both "^finding: .*plane 1"
expect "slow both ways: weights put node3's plane 0 at a small share" slow_both \
    "^  adaptive weights node3 -> node[012]: plane 0 \(ethA\) 0\.[01][0-9] of each message"
expect "slow both ways: and towards node3 too" slow_both \
    "^  adaptive weights node[012] -> node3: plane 0 \(ethA\) 0\.[01][0-9] of each message"
lab fault 3 a heal

# ------------------------------------------------------------ a link down
lab fault 0 b blackhole
run blackhole --no-bw --timeout 2
expect_rc "node0 ethB black-holed" 1
expect "black hole: node and plane named" blackhole \
    "^finding: node0 plane 1 \(ethB\): reaches none of its 3 peers and none reaches it"
expect_not "black hole: isolation not blamed" blackhole "^finding: .*(cabled|isolated|swapped)"
lab fault 0 b heal

# ------------------------------------------------------------ mis-cabled
if ! lab up --nodes 4 --rate "$RATE" --miscable 1; then
    bad "lab up --miscable 1"
    finish
fi
if [[ $(timeout 30 "$LAB" status) == *$'\nmis-cabled: node1 '* ]]; then
    ok "lab status names the mis-cabled node"
else
    bad "lab status names the mis-cabled node"
fi
run miscabled
expect_rc "node1 mis-cabled" 1
expect "mis-cabled: swap named" miscabled \
    "^finding: node1: ethA and ethB are swapped \(ethA is on plane 1's segment, ethB on plane 0's\)"
expect "mis-cabled: ethA evidence" miscabled \
    "node1 ethA \(plane 0\) is cabled to plane 1: answered on plane 1 by node0 node2 node3, on plane 0 by none"
expect "mis-cabled: unreachable on plane 0" miscabled \
    "^finding: node1 plane 0 \(ethA\): reaches none of its 3 peers"
expect "mis-cabled: unreachable on plane 1" miscabled \
    "^finding: node1 plane 1 \(ethB\): reaches none of its 3 peers"
expect_not "mis-cabled: no other node blamed" miscabled "^finding: .*node[023]"
expect "mis-cabled: the healthy links still measured" miscabled "plane 0 \(ethA\): median .* over 6 links"

# node 0 mis-cabled: lab.sh must still come up (its hub moves to node 1)
if lab up --nodes 3 --miscable 0; then ok "lab up --miscable 0"; else bad "lab up --miscable 0"; fi
run miscabled0 --no-bw
expect_rc "node0 mis-cabled" 1
expect "mis-cabled node0: swap named" miscabled0 "^finding: node0: ethA and ethB are swapped"

# ------------------------------------------------------------ bad input
run badopt --bw-tolerance 2
expect_rc "bad option" 2
expect "bad option: said why" badopt "out-of-range value"
run badplanes --planes 'ethA,'
expect_rc "bad plane list" 2
# The status leaves through rank 0 alone (the launcher of Debian 13 could crash tearing
# down a job whose ranks all failed at once): each rank's own status, recorded by a shell
# around it, is 2 on rank 0 and 0 on the others.
rm -f "$WORK/rank_rc."*
# shellcheck disable=SC2016  # expanded by the shell on each node
timeout 240 "$LAB" mpirun -np 3 --map-by ppr:1:node sh -c \
    '"$0" --bw-tolerance 2 >/dev/null 2>&1; echo $? > "$1/rank_rc.$OMPI_COMM_WORLD_RANK"' \
    "$CHECK" "$WORK" >/dev/null 2>&1
per_rank=$(cat "$WORK/rank_rc.0" "$WORK/rank_rc.1" "$WORK/rank_rc.2" 2>/dev/null | tr '\n' ' ')
if [[ $per_rank == "2 0 0 " ]]; then ok "bad option: only rank 0 exits 2"; else
    bad "bad option: per-rank exit status '$per_rank', expected '2 0 0 '"; fi
if ! lab up --nodes 4 --miscable 4 >/dev/null 2>&1; then ok "lab up rejects --miscable 4 on 4 nodes"; else
    bad "lab up accepted --miscable 4 on 4 nodes"; fi
if ! lab up --nodes 2 --miscable x >/dev/null 2>&1; then ok "lab up rejects --miscable x"; else
    bad "lab up accepted --miscable x"; fi

finish
