#!/usr/bin/env bash
# shellcheck disable=SC2317  # helpers are called through check/check_not
# Self-test of contrib/lab.sh (needs root).  Uses its own lab prefix so it
# does not disturb another lab on the machine; tears its lab down on exit.
# Last line of output: "N passed, N failed"; exit status 0 only if all passed.
set -uo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
LAB=$REPO/contrib/lab.sh
export DUALRAIL_LAB_PREFIX=drlabst
P=$DUALRAIL_LAB_PREFIX

PASS=0
FAIL=0
ok() { PASS=$((PASS + 1)); echo "PASS: $*"; }
bad() { FAIL=$((FAIL + 1)); echo "FAIL: $*"; }
# check DESCRIPTION CMD... : pass if CMD succeeds
check() { local d=$1; shift; if "$@"; then ok "$d"; else bad "$d"; fi; }
# check_not DESCRIPTION CMD... : pass if CMD fails
check_not() { local d=$1; shift; if "$@"; then bad "$d"; else ok "$d"; fi; }
finish() { echo "$PASS passed, $FAIL failed"; [[ $FAIL -eq 0 ]]; exit $?; }

lab() { timeout 120 "$LAB" "$@"; }
ex() { timeout 30 "$LAB" exec "$@"; }
ping_ok() { ex "$1" ping -c1 -W1 -q "$2" >/dev/null 2>&1; }
# ping with retries (bounded), for paths that must come back
ping_eventually() {
    local k
    for ((k = 0; k < 10; k++)); do
        ping_ok "$1" "$2" && return 0
        sleep 0.3
    done
    return 1
}
counter() { ex "$1" cat "/sys/class/net/$2/statistics/$3"; }

if [[ $(id -u) -ne 0 ]]; then
    bad "must run as root"
    finish
fi
if [[ ! -x $LAB ]]; then
    bad "$LAB missing or not executable"
    finish
fi

WORK=$(mktemp -d /tmp/lab_selftest.XXXXXX)
cleanup() {
    timeout 60 "$LAB" down >/dev/null 2>&1 || true
    rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# ------------------------------------------------------------ bring-up
check "down when nothing is up exits 0" lab down
check_not "status fails when the lab is not up" lab status
check "up --nodes 2" lab up --nodes 2
check "nodes prints 2" test "$(lab nodes)" = 2
t0=$(date +%s.%N)
if lab up --nodes 3 --rate 200mbit; then ok "up again (re-create) --nodes 3 --rate 200mbit"; else
    bad "up --nodes 3 --rate 200mbit"
    finish
fi
t1=$(date +%s.%N)
echo "  (up took $(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.2f", b - a }') s)"
check "nodes prints 3" test "$(lab nodes)" = 3
# The congestion control is the lab's, not the host's default (bbr on this project's
# machine left capped planes 10-20% idle under several connections): reno unless --cc.
check "every node runs reno" test "$(for i in 0 1 2; do ex "$i" sysctl -n net.ipv4.tcp_congestion_control; done | sort -u)" = reno
check "status shows the congestion control" bash -c "timeout 20 '$LAB' status | grep -q '^tcp congestion control: reno$'"
check "addr 1 b is 10.209.2.2" test "$(lab addr 1 b)" = 10.209.2.2
check "addr 2 m is 10.209.0.3" test "$(lab addr 2 m)" = 10.209.0.3

# ------------------------------------------------------------ identity
for i in 0 1 2; do
    check "node$i hostname" test "$(ex "$i" hostname)" = "node$i"
done
check "root hostname untouched" test "$(hostname)" != node0
check "/sys/class/net shows the node's interfaces" \
    test "$(ex 1 ls /sys/class/net | sort | tr '\n' ' ')" = "ethA ethB ethM lo "
check "node2 resolves node0 to its management address" \
    bash -c "timeout 10 '$LAB' exec 2 getent hosts node0 | grep -q '^10.209.0.1 '"
check "exec passes the exit status" test "$(ex 1 sh -c 'exit 7' >/dev/null 2>&1; echo $?)" = 7

# ------------------------------------------------------------ reachability
for t in 10.209.0.2 10.209.1.2 10.209.2.2 10.209.0.3 10.209.1.3 10.209.2.3; do
    check "node0 pings $t" ping_ok 0 "$t"
done
for t in 10.209.0.1 10.209.1.1 10.209.2.1; do
    check "node2 pings $t" ping_ok 2 "$t"
done
check_not "no cross-plane path: node0 -I ethA 10.209.2.2" ex 0 ping -c1 -W1 -q -I ethA 10.209.2.2 >/dev/null 2>&1
check_not "no cross-plane path: node0 -I ethB 10.209.1.2" ex 0 ping -c1 -W1 -q -I ethB 10.209.1.2 >/dev/null 2>&1
check_not "no cross-plane path: node0 -I ethM 10.209.1.2" ex 0 ping -c1 -W1 -q -I ethM 10.209.1.2 >/dev/null 2>&1

# ------------------------------------------------------------ bytes and caps
PY=$(command -v python3 || true)
if [[ -z $PY ]]; then
    bad "python3 not found: byte-counter and rate tests skipped"
else
    cat >"$WORK/sink.py" <<'EOF'
import socket, sys
srv = socket.socket(); srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
srv.bind((sys.argv[1], int(sys.argv[2]))); srv.listen(1); srv.settimeout(20)
c, _ = srv.accept(); c.settimeout(20); n = 0
while True:
    b = c.recv(1 << 20)
    if not b: break
    n += len(b)
c.sendall(b"ok"); c.close(); print(n)
EOF
    cat >"$WORK/source.py" <<'EOF'
import socket, sys, time
host, port, size = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
end = time.time() + 10
while True:
    try:
        s = socket.create_connection((host, port), timeout=2); break
    except OSError:
        if time.time() > end: raise
        time.sleep(0.05)
s.settimeout(30); buf = b"x" * (1 << 20); t = time.time(); left = size
while left > 0:
    k = s.send(buf[:min(left, len(buf))]); left -= k
s.shutdown(socket.SHUT_WR)
assert s.recv(2) == b"ok"
print("%.3f" % (time.time() - t))
EOF
    SIZE=$((20 * 1024 * 1024))
    declare -A before after
    for d in ethM ethA ethB; do
        before[0$d]=$(counter 0 $d tx_bytes)
        before[1$d]=$(counter 1 $d rx_bytes)
    done
    timeout 40 "$LAB" exec 1 "$PY" "$WORK/sink.py" 10.209.1.2 5201 >"$WORK/sink.out" 2>&1 &
    sinkpid=$!
    secs=$(timeout 40 "$LAB" exec 0 "$PY" "$WORK/source.py" 10.209.1.2 5201 "$SIZE" 2>"$WORK/source.err")
    wait "$sinkpid"
    got=$(cat "$WORK/sink.out")
    for d in ethM ethA ethB; do
        after[0$d]=$(counter 0 $d tx_bytes)
        after[1$d]=$(counter 1 $d rx_bytes)
    done
    dA=$((after[0ethA] - before[0ethA])) dM=$((after[0ethM] - before[0ethM])) dB=$((after[0ethB] - before[0ethB]))
    rA=$((after[1ethA] - before[1ethA]))
    echo "  (20 MiB over plane A: ${secs:-?} s; node0 tx ethA=$dA ethM=$dM ethB=$dB; node1 rx ethA=$rA)"
    check "sink received 20 MiB over plane A" test "$got" = "$SIZE"
    check "node0 ethA tx counter grew by >= 20 MiB" test "$dA" -ge "$SIZE"
    check "node1 ethA rx counter grew by >= 20 MiB" test "$rA" -ge "$SIZE"
    check "node0 ethM tx grew by < 1 MiB" test "$dM" -lt 1048576
    check "node0 ethB tx grew by < 1 MiB" test "$dB" -lt 1048576
    check "200mbit cap: 20 MiB took >= 0.6 s and < 10 s" \
        awk -v s="${secs:-0}" 'BEGIN { exit !(s >= 0.6 && s < 10) }'
    check "status shows the 200Mbit caps" bash -c "timeout 20 '$LAB' status | grep -q 'tbf(200Mbit)'"
fi

# ------------------------------------------------------------ faults
for kind in down blackhole reset; do
    if lab fault 1 a "$kind"; then ok "fault 1 a $kind"; else bad "fault 1 a $kind"; fi
    check_not "$kind: node0 cannot ping node1 on plane A" ping_ok 0 10.209.1.2
    check "$kind: node0 still pings node1 on plane B" ping_ok 0 10.209.2.2
    check "$kind: node0 still pings node1 on the management net" ping_ok 0 10.209.0.2
    check "$kind: status shows the fault" \
        bash -c "timeout 20 '$LAB' status | grep -q 'node1 plane a: .*$kind'"
    check "heal 1 a after $kind" lab fault 1 a heal
    check "heal is idempotent" lab fault 1 a heal
    check "$kind healed: plane A works again" ping_eventually 0 10.209.1.2
    check "$kind healed: status shows no fault" bash -c "timeout 20 '$LAB' status | grep -q '^faults: none'"
done
check "reset: cap restored after heal" \
    bash -c "timeout 20 '$LAB' status | grep -A2 '^node1 ' | grep -q 'ethA .*out=tbf(200Mbit) *in=tbf(200Mbit)'"
if [[ -n $PY ]]; then
    lab fault 1 a reset >/dev/null 2>&1
    r=$(ex 0 "$PY" -c '
import socket
try:
    socket.create_connection(("10.209.1.2", 5999), timeout=3); print("connected")
except Exception as e: print(type(e).__name__)' 2>&1)
    check "reset: TCP connect to node1 plane A is refused by a reset (got $r)" test "$r" = ConnectionRefusedError
    lab fault 1 a heal >/dev/null 2>&1
fi
check "fault flap starts" lab fault 2 b flap --down 0.3 --up 0.3 --count 20
sleep 0.2
check "flap: status shows it" bash -c "timeout 20 '$LAB' status | grep -q 'node2 plane b: .*flap'"
check "flap: heal stops it" lab fault 2 b heal
sleep 0.7
check "flap healed: plane B works" ping_eventually 0 10.209.2.3
check "flap healed: link stays up" bash -c "timeout 10 '$LAB' exec 2 ip -o link show ethB | grep -q 'state UP'"

# ------------------------------------------------------------ bad arguments
errmsg() { # CMD... : must fail with a "lab.sh: " message on stderr
    local err
    if err=$(timeout 30 "$LAB" "$@" 2>&1 >/dev/null); then return 1; fi
    [[ $err == *"lab.sh: "* ]]
}
check "fault node 99 is rejected" errmsg fault 99 a down
check "fault plane c is rejected" errmsg fault 0 c down
check "fault kind x is rejected" errmsg fault 0 a x
check "exec node 99 is rejected" errmsg exec 99 true
check "addr plane q is rejected" errmsg addr 0 q
check "unknown command is rejected" errmsg frobnicate
check "up --bogus is rejected" errmsg up --bogus
check "up --nodes 1 is rejected" errmsg up --nodes 1
check "up --nodes 17 is rejected" errmsg up --nodes 17
check "up --rate nonsense is rejected" errmsg up --rate fast
check "up --cc 'a b' is rejected" errmsg up --cc 'a b'
check "up --cc nosuchcc is rejected" errmsg up --cc nosuchcc
check "rejected up left the lab running" test "$(lab nodes 2>/dev/null)" = 3
check "help prints usage" bash -c "'$LAB' help | grep -q '^usage: lab.sh'"

# ------------------------------------------------------------ mpirun
if command -v mpirun >/dev/null 2>&1; then
    hosts=$(timeout 90 "$LAB" mpirun -np 3 --map-by node hostname 2>"$WORK/mpirun.err")
    echo "  (mpirun hostnames: $(echo "$hosts" | tr '\n' ' '))"
    check "mpirun -np 3 --map-by node hostname: node0 node1 node2" \
        test "$(echo "$hosts" | sort | tr '\n' ' ')" = "node0 node1 node2 "
    # The lab's nodes share this machine's cores: a rank bound to a core would time-slice
    # it with the other nodes' ranks (Open MPI 5's launcher binds a job of 2 ranks or
    # fewer to a core by default, core 0 on every node; 3 or more to a package). Each
    # rank may run on every core the machine has.
    cpus='s/^Cpus_allowed_list:[[:space:]]*//p'
    mine=$(sed -n "$cpus" /proc/self/status)
    allowed=$(timeout 90 "$LAB" mpirun -np 2 --map-by node \
        sh -c "sed -n '$cpus' /proc/self/status" 2>>"$WORK/mpirun.err" | sort -u | tr '\n' ' ')
    check "mpirun leaves the ranks unbound (cores $mine, as this script: $allowed)" \
        test "$allowed" = "$mine "
    if command -v mpicc >/dev/null 2>&1; then
        cat >"$WORK/pp.c" <<'EOF'
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
int main(int argc, char **argv) {
    int r, i, n = 4 << 20;
    char *b;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &r);
    b = calloc(n, 1);
    for (i = 0; i < 5; i++) {
        if (r == 0) {
            MPI_Send(b, n, MPI_CHAR, 1, 0, MPI_COMM_WORLD);
            MPI_Recv(b, n, MPI_CHAR, 1, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        } else if (r == 1) {
            MPI_Recv(b, n, MPI_CHAR, 0, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            MPI_Send(b, n, MPI_CHAR, 0, 0, MPI_COMM_WORLD);
        }
    }
    if (r == 0) printf("pingpong done\n");
    MPI_Finalize();
    return 0;
}
EOF
        if mpicc -o "$WORK/pp" "$WORK/pp.c" 2>"$WORK/mpicc.err"; then
            m0=$(counter 0 ethM tx_bytes)
            out=$(timeout 90 "$LAB" mpirun -np 2 --map-by node "$WORK/pp" 2>>"$WORK/mpirun.err")
            m1=$(counter 0 ethM tx_bytes)
            check "mpirun -np 2 --map-by node ping-pong runs" test "$out" = "pingpong done"
            check "ping-pong crossed node0's ethM (>= 20 MiB, got $((m1 - m0)))" \
                test $((m1 - m0)) -ge $((20 * 1024 * 1024))
        else
            bad "mpicc failed: $(head -3 "$WORK/mpicc.err")"
        fi
    fi
    if ((FAIL)) && [[ -s $WORK/mpirun.err ]]; then sed 's/^/  mpirun stderr: /' "$WORK/mpirun.err" | head -20; fi
else
    bad "mpirun not installed: cannot test lab.sh mpirun"
fi

# ------------------------------------------------------------ teardown
check "down" lab down
check "no $P namespaces left" bash -c "! ip netns list | grep -qE '^$P-'"
check "no /run/$P left" test ! -e "/run/$P"
check "no $P mounts left" bash -c "! grep -q '$P' /proc/mounts"
check "no /etc/netns/$P-* left" bash -c "! ls -d /etc/netns/$P-* >/dev/null 2>&1"
check "down twice exits 0" lab down
check_not "status fails after down" lab status
check_not "exec fails after down" lab exec 0 true

finish
