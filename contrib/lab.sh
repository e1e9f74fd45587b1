#!/usr/bin/env bash
# lab.sh - an emulated dual-plane cluster on one Linux machine.
#
# N nodes, each a network namespace (plus its own UTS namespace, hostname
# node<i>), and one "switch" namespace holding three bridges: brM
# (management), brA (plane A) and brB (plane B).  Each node has three veth
# legs: ethM, ethA, ethB.  tc caps plane rates; faults are injected per node
# and plane.  Everything the lab makes carries a prefix (default "drlab",
# env DUALRAIL_LAB_PREFIX) so two labs can coexist and nothing else on the
# machine is touched.  Run "lab.sh help" for the interface.
#
# Layout (prefix P, node i, 0-based):
#   netns        P-n<i> (nodes), P-sw (switch: brM brA brB, legs n<i>M/A/B)
#   UTS ns       /run/P/uts/node<i> (bind-mounted nsfs; hostname node<i>)
#   addresses    ethM 10.209.0.(i+1)/24, ethA 10.209.1.(i+1)/24,
#                ethB 10.209.2.(i+1)/24; only connected routes
#   state        /run/P/ (state, hostfile, rsh-agent, flap pid files)
#   hosts        /etc/netns/P-n<i>/hosts (ip netns exec bind-mounts it)
#   firewall     iptables chains DRLAB-A / DRLAB-B inside node namespaces
set -euo pipefail

PROG=lab.sh
PREFIX=${DUALRAIL_LAB_PREFIX:-drlab}
RUN=/run/$PREFIX
SW=$PREFIX-sw
NET=10.209
MAX_NODES=16
UP_WAIT=${DUALRAIL_LAB_UP_WAIT:-20}   # seconds to wait for full reachability
SELF=$(readlink -f "${BASH_SOURCE[0]}")
REPO=$(dirname "$(dirname "$SELF")")

die() { echo "$PROG: $*" >&2; exit 1; }
warn() { echo "$PROG: $*" >&2; }

usage() {
    cat <<'EOF'
usage: lab.sh COMMAND [ARGS]

  up [--nodes N] [--rate R | --rate-a R --rate-b R] [--tcp-retries2 N]
     [--mtu BYTES] [--miscable NODE] [--cc NAME]
                          (re)create the lab: N nodes (2..16, default 4);
                          optional tc rate caps (tc syntax: 1gbit, 500mbit)
                          on both directions of each node's plane links;
                          --mtu sets the planes' MTU (default 1500; 9000 =
                          jumbo frames, as data-centre fabrics run);
                          returns once every node reaches every other node
                          on the management network and both planes;
                          --miscable NODE wires NODE's ethA to plane B's
                          bridge and its ethB to plane A's (addresses
                          unchanged: a swapped cable pair, for wiring
                          checks); its planes are then not waited for;
                          --cc sets the nodes' TCP congestion control
                          (default $DUALRAIL_LAB_CC, else reno: see cmd_up)
  down                    remove everything the lab made (idempotent)
  status                  nodes, addresses, link states, caps and faults
  nodes                   print the node count of the running lab
  addr NODE PLANE         print NODE's address on plane m|a|b
  exec NODE CMD...        run CMD inside NODE (its netns, /sys and hostname)
  mpirun ARGS...          Open MPI mpirun started inside node 0 across the
                          nodes (hostfile, rsh agent, ethM-only runtime and
                          btl_tcp, ${DUALRAIL_BUILD_DIR:-build}/mpi_coll first
                          in the component path, --bind-to none unless ARGS
                          bind: the nodes share this machine's cores)
  fault NODE PLANE KIND   inject a fault on NODE's plane a|b; KIND is
                            down       link down (ip link set ethX down)
                            blackhole  drop everything leaving and entering
                            reset      iptables REJECT with tcp-reset
                            flap [--down S] [--up S] [--count N]
                                       toggle the link in the background
                                       (default 1 s down, 1 s up, 60 cycles)
                            heal       undo every fault on NODE/PLANE
  help                    this text

Environment: DUALRAIL_LAB_PREFIX (default drlab) names every object of the
lab; DUALRAIL_BUILD_DIR (default build, relative to the repository root).
Addresses: node i has 10.209.0.(i+1) (ethM), 10.209.1.(i+1) (ethA),
10.209.2.(i+1) (ethB); hostname node<i> resolves to its ethM address.
EOF
}

# ---------------------------------------------------------------- helpers

[[ $PREFIX =~ ^[A-Za-z][A-Za-z0-9_]{0,11}$ ]] ||
    die "bad DUALRAIL_LAB_PREFIX '$PREFIX' (letters, digits, _; at most 12)"

# Names are spelled inline in loops ("$PREFIX-n$i", "$RUN/uts/node$i",
# "$NET.${PIDX[$p]}.$((i + 1))"): command substitutions cost a fork each.
declare -A PIDX=([m]=0 [a]=1 [b]=2) PIF=([m]=ethM [a]=ethA [b]=ethB) PUC=([m]=M [a]=A [b]=B)
addr_of() { echo "$NET.${PIDX[$2]}.$(($1 + 1))"; }

need_root() { [[ $(id -u) -eq 0 ]] || die "must run as root"; }

need_tools() {
    local t
    for t in "$@"; do
        command -v "$t" >/dev/null 2>&1 || die "required tool '$t' not found"
    done
}

is_uint() { [[ $1 =~ ^[0-9]+$ ]]; }

ns_exists() { [[ -e /run/netns/$1 ]]; }

# The state file: KEY=VALUE lines, loaded into ST_<KEY>.
ST_NODES='' ST_RATE_A='' ST_RATE_B='' ST_TCP_RETRIES2='' ST_MISCABLE='' ST_MTU=''
load_state() {
    local k v
    ST_NODES='' ST_RATE_A='' ST_RATE_B='' ST_TCP_RETRIES2='' ST_MISCABLE='' ST_MTU='' ST_CC=''
    [[ -f $RUN/state ]] || return 0
    while IFS='=' read -r k v; do
        case $k in
            NODES) ST_NODES=$v ;;
            RATE_A) ST_RATE_A=$v ;;
            RATE_B) ST_RATE_B=$v ;;
            TCP_RETRIES2) ST_TCP_RETRIES2=$v ;;
            MISCABLE) ST_MISCABLE=$v ;;
            MTU) ST_MTU=$v ;;
            CC) ST_CC=$v ;;
        esac
    done <"$RUN/state"
}

is_up() {
    local i
    load_state
    is_uint "$ST_NODES" || return 1
    ns_exists "$SW" || return 1
    for ((i = 0; i < ST_NODES; i++)); do
        ns_exists "$PREFIX-n$i" || return 1
        [[ -e $RUN/uts/node$i ]] || return 1
    done
}

require_up() { is_up || die "lab '$PREFIX' is not up (run: lab.sh up)"; }

check_node() {
    local n=$ST_NODES
    is_uint "$1" || die "bad node '$1' (expected 0..$((n - 1)))"
    (($1 < n)) || die "node $1 out of range (lab has $n nodes: 0..$((n - 1)))"
}

check_plane() {
    case $1 in a|b|A|B) ;; *) die "bad plane '$1' (expected a or b)" ;; esac
}

# tc rate -> bits per second (integer), or fail.
rate_bits() {
    local r=${1,,} num unit mult
    [[ $r =~ ^([0-9]+(\.[0-9]+)?)([a-z]*)$ ]] || return 1
    num=${BASH_REMATCH[1]} unit=${BASH_REMATCH[3]}
    case $unit in
        ''|bit) mult=1 ;;
        kbit) mult=1000 ;; mbit) mult=1000000 ;;
        gbit) mult=1000000000 ;; tbit) mult=1000000000000 ;;
        kibit) mult=1024 ;; mibit) mult=1048576 ;;
        gibit) mult=1073741824 ;; tibit) mult=1099511627776 ;;
        bps) mult=8 ;;
        kbps) mult=8000 ;; mbps) mult=8000000 ;;
        gbps) mult=8000000000 ;; tbps) mult=8000000000000 ;;
        kibps) mult=8192 ;; mibps) mult=8388608 ;;
        gibps) mult=8589934592 ;; tibps) mult=8796093022208 ;;
        *) return 1 ;;
    esac
    awk -v n="$num" -v m="$mult" 'BEGIN { v = n * m; if (v < 8000) exit 1; printf "%.0f\n", v }'
}

# The tbf qdisc spec for rate R, into TBF: burst = 4 ms worth, at least
# 64 KiB (one GSO super-packet), queue bounded to 25 ms.
declare -A TBF_CACHE=()
tbf_spec() {
    local bits burst
    if [[ -z ${TBF_CACHE[$1]:-} ]]; then
        bits=$(rate_bits "$1")
        burst=$(awk -v b="$bits" 'BEGIN { x = b / 8 * 0.004; if (x < 65536) x = 65536; printf "%.0f\n", x }')
        TBF_CACHE[$1]="tbf rate $1 burst $burst latency 25ms"
    fi
    TBF=${TBF_CACHE[$1]}
}

# Put the configured cap (or the default qdisc) back on NODE's PLANE, both
# the node side (egress of the node) and the switch side (into the node).
restore_qdisc() {
    local i=$1 p=$2 ns dev peer rate
    ns=$PREFIX-n$i dev=${PIF[$p]} peer=n$i${PUC[$p]}
    if [[ $p == a ]]; then rate=$ST_RATE_A; else rate=$ST_RATE_B; fi
    if [[ -n $rate ]]; then
        tbf_spec "$rate"
        # shellcheck disable=SC2086
        tc -n "$ns" qdisc replace dev "$dev" root $TBF
        # shellcheck disable=SC2086
        tc -n "$SW" qdisc replace dev "$peer" root $TBF
    else
        tc -n "$ns" qdisc del dev "$dev" root 2>/dev/null || true
        tc -n "$SW" qdisc del dev "$peer" root 2>/dev/null || true
    fi
}

# Is the pid in pid file $1 a live flapper of this lab (checked by cmdline,
# which is empty for a zombie)?
flapper_alive() {
    local pid='' arg
    [[ -f $1 ]] || return 1
    read -r pid <"$1" 2>/dev/null || true
    is_uint "$pid" && [[ -r /proc/$pid/cmdline ]] || return 1
    # the marker is one argument of the flapper's command line
    while IFS= read -r -d '' arg; do
        [[ $arg == "drlab-flap $PREFIX " ]] && return 0
    done <"/proc/$pid/cmdline" 2>/dev/null
    return 1
}

# Stop the flapper of pid file $1 (if any) and remove the file.
kill_flapper() {
    local f=$1 pid=''
    [[ -f $f ]] || return 0
    read -r pid <"$f" 2>/dev/null || true
    if flapper_alive "$f"; then
        kill "$pid" 2>/dev/null || true
        local k
        for ((k = 0; k < 20; k++)); do
            flapper_alive "$f" || break
            sleep 0.1
        done
        flapper_alive "$f" && kill -9 "$pid" 2>/dev/null
    fi
    rm -f "$f"
}

# Serialize up/down/fault of all labs (advisory lock on this script; the
# descriptor is closed in background helpers).
take_lock() {
    exec 9<"$SELF"
    flock -w 120 9 || die "timed out waiting for another lab.sh to finish"
}

# ---------------------------------------------------------------- down

# Terminate processes still inside a namespace (the lab's "power off").
kill_ns_pids() {
    local ns=$1 pids k
    pids=$(ip netns pids "$ns" 2>/dev/null | tr '\n' ' ' || true)
    [[ -n ${pids// /} ]] || return 0
    # shellcheck disable=SC2086
    kill $pids 2>/dev/null || true
    for ((k = 0; k < 30; k++)); do
        pids=$(ip netns pids "$ns" 2>/dev/null | tr '\n' ' ' || true)
        [[ -n ${pids// /} ]] || return 0
        sleep 0.1
    done
    # shellcheck disable=SC2086
    kill -9 $pids 2>/dev/null || true
}

do_down() {
    local ns f m
    # background flappers first, so they stop touching links
    if [[ -d $RUN ]]; then
        for f in "$RUN"/flap-*.pid; do
            [[ -e $f ]] && kill_flapper "$f"
        done
    fi
    # namespaces of this prefix only: P-n<digits> and P-sw
    if [[ -d /run/netns ]]; then
        for f in /run/netns/*; do
            ns=${f##*/}
            [[ $ns =~ ^${PREFIX}-(n[0-9]+|sw)$ ]] || continue
            kill_ns_pids "$ns"
            ip netns del "$ns" 2>/dev/null || {
                umount -l "$f" 2>/dev/null || true
                rm -f "$f" 2>/dev/null || true
            }
        done
    fi
    # mounts under /run/P (UTS ns files, then the private bind mount)
    local -a mounts=()
    while read -r _ m _; do
        [[ $m == "$RUN" || $m == "$RUN"/* ]] && mounts+=("$m")
    done </proc/mounts
    if ((${#mounts[@]})); then
        while read -r m; do
            umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null || true
        done < <(printf '%s\n' "${mounts[@]}" | awk '{ print length($0) " " $0 }' | sort -rn | cut -d' ' -f2-)
    fi
    # a bind mount can be stacked; bounded retries
    for ((f = 0; f < 5; f++)); do
        grep -q " ${RUN}[ /]" /proc/mounts || break
        umount -l "$RUN/uts" 2>/dev/null || true
    done
    rm -rf "$RUN"
    # per-netns /etc files
    if [[ -d /etc/netns ]]; then
        for f in /etc/netns/*; do
            ns=${f##*/}
            [[ $ns =~ ^${PREFIX}-(n[0-9]+|sw)$ ]] && rm -rf "$f"
        done
        rmdir /etc/netns 2>/dev/null || true
    fi
    return 0
}

cmd_down() {
    [[ $# -eq 0 ]] || die "down takes no arguments"
    need_root
    need_tools ip
    take_lock
    do_down
}

# ---------------------------------------------------------------- up

cmd_up() {
    # TCP congestion control of every node: fixed, so that the lab's figures do not depend
    # on the host's default (this project's machine has bbr, Debian's default is cubic).
    # reno because a network namespace may only pick from the host's
    # tcp_allowed_congestion_control, which always holds reno (cubic was refused here), and
    # at the lab's round-trip times (tens of microseconds) cubic runs in its Reno-friendly
    # region anyway. bbr under a tbf cap left a 500 Mbit/s plane 10-20% idle whenever
    # several connections shared it (alltoall: 0.84-0.86 of the payload limit on two planes,
    # 0.85-0.88 on one; 0.99 with reno and one connection per link direction).
    local nodes=4 rate_a='' rate_b='' retries2='' miscable='' mtu=1500 cc=${DUALRAIL_LAB_CC:-reno} i p
    while (($#)); do
        case $1 in
            --nodes|-n) [[ $# -ge 2 ]] || die "--nodes needs a value"; nodes=$2; shift 2 ;;
            --nodes=*) nodes=${1#*=}; shift ;;
            --rate) [[ $# -ge 2 ]] || die "--rate needs a value"; rate_a=$2; rate_b=$2; shift 2 ;;
            --rate=*) rate_a=${1#*=}; rate_b=$rate_a; shift ;;
            --rate-a) [[ $# -ge 2 ]] || die "--rate-a needs a value"; rate_a=$2; shift 2 ;;
            --rate-a=*) rate_a=${1#*=}; shift ;;
            --rate-b) [[ $# -ge 2 ]] || die "--rate-b needs a value"; rate_b=$2; shift 2 ;;
            --rate-b=*) rate_b=${1#*=}; shift ;;
            --tcp-retries2) [[ $# -ge 2 ]] || die "--tcp-retries2 needs a value"; retries2=$2; shift 2 ;;
            --tcp-retries2=*) retries2=${1#*=}; shift ;;
            --mtu) [[ $# -ge 2 ]] || die "--mtu needs a value"; mtu=$2; shift 2 ;;
            --mtu=*) mtu=${1#*=}; shift ;;
            --miscable) [[ $# -ge 2 ]] || die "--miscable needs a node"; miscable=$2; shift 2 ;;
            --miscable=*) miscable=${1#*=}; shift ;;
            --cc) [[ $# -ge 2 ]] || die "--cc needs a value"; cc=$2; shift 2 ;;
            --cc=*) cc=${1#*=}; shift ;;
            *) die "up: unknown option '$1'" ;;
        esac
    done
    is_uint "$nodes" || die "bad --nodes '$nodes'"
    ((nodes >= 2 && nodes <= MAX_NODES)) || die "--nodes must be 2..$MAX_NODES (got $nodes)"
    for p in "$rate_a" "$rate_b"; do
        [[ -z $p ]] || rate_bits "$p" >/dev/null || die "bad rate '$p' (tc syntax, e.g. 1gbit, 500mbit; at least 8kbit)"
    done
    [[ -z $retries2 ]] || { is_uint "$retries2" && ((retries2 <= 255)); } ||
        die "bad --tcp-retries2 '$retries2' (0..255)"
    { is_uint "$mtu" && ((mtu >= 1280 && mtu <= 9000)); } || die "bad --mtu '$mtu' (1280..9000)"
    [[ $cc =~ ^[a-z0-9_]+$ ]] || die "bad --cc '$cc' (a congestion control name, e.g. reno)"
    [[ -z $miscable ]] || { is_uint "$miscable" && ((miscable < nodes)); } ||
        die "bad --miscable '$miscable' (a node: 0..$((nodes - 1)))"
    need_root
    need_tools ip tc iptables nsenter unshare ping mount umount flock sysctl
    # Checked before the old lab goes: a namespace may only take what the host allows.
    local allowed
    allowed=$(sysctl -n net.ipv4.tcp_allowed_congestion_control 2>/dev/null || true)
    [[ " $allowed " == *" $cc "* ]] ||
        die "--cc $cc: not available to a network namespace here (allowed: ${allowed:-unknown})"
    take_lock

    do_down
    UP_DONE=0
    trap up_exit EXIT

    mkdir -p "$RUN/uts"
    mount --bind "$RUN/uts" "$RUN/uts"
    mount --make-private "$RUN/uts"
    {
        echo "NODES=$nodes"
        echo "RATE_A=$rate_a"
        echo "RATE_B=$rate_b"
        echo "TCP_RETRIES2=$retries2"
        echo "MISCABLE=$miscable"
        echo "MTU=$mtu"
        echo "CC=$cc"
    } >"$RUN/state"
    load_state

    # switch
    ip netns add "$SW"
    ip netns exec "$SW" sysctl -q -w net.ipv6.conf.all.disable_ipv6=1 \
        net.ipv6.conf.default.disable_ipv6=1 >/dev/null
    {
        echo "link set lo up"
        for p in M A B; do
            echo "link add br$p type bridge forward_delay 0 stp_state 0 mcast_snooping 0"
        done
    } | ip -n "$SW" -batch -

    # nodes
    local ns hosts_body br
    hosts_body=$(
        echo "127.0.0.1 localhost"
        echo "::1 localhost ip6-localhost ip6-loopback"
        for ((i = 0; i < nodes; i++)); do
            echo "$NET.0.$((i + 1)) node$i"
            echo "$NET.1.$((i + 1)) node$i-a"
            echo "$NET.2.$((i + 1)) node$i-b"
        done
    )
    for ((i = 0; i < nodes; i++)); do
        ns=$PREFIX-n$i
        ip netns add "$ns"
        mkdir -p "/etc/netns/$ns"
        printf '%s\n' "$hosts_body" >"/etc/netns/$ns/hosts"
        : >"$RUN/uts/node$i"
        unshare --uts="$RUN/uts/node$i" hostname "node$i"
        # legs: created in the switch with their node-side peer in the node
        for p in M A B; do
            echo "link add n$i$p type veth peer name eth$p netns $ns"
        done | ip -n "$SW" -batch -
        local -a sysctls=(
            net.ipv6.conf.default.disable_ipv6=1
            net.ipv6.conf.ethM.disable_ipv6=1
            net.ipv6.conf.ethA.disable_ipv6=1
            net.ipv6.conf.ethB.disable_ipv6=1
            # strict host model: answer ARP only for the address of the
            # interface asked, drop packets arriving on the wrong plane
            net.ipv4.conf.all.arp_ignore=1
            net.ipv4.conf.all.arp_announce=2
            net.ipv4.conf.all.rp_filter=1
            net.ipv4.conf.default.rp_filter=1
            net.ipv4.ip_forward=0
        )
        [[ -z $retries2 ]] || sysctls+=("net.ipv4.tcp_retries2=$retries2")
        ip netns exec "$ns" sysctl -q -w "${sysctls[@]}" >/dev/null
        ip netns exec "$ns" sysctl -q -w "net.ipv4.tcp_congestion_control=$cc" >/dev/null 2>&1 ||
            die "--cc $cc: not available to a network namespace here (allowed:" \
                "$(ip netns exec "$ns" sysctl -n net.ipv4.tcp_allowed_congestion_control 2>/dev/null))"
        {
            echo "link set lo up"
            for p in m a b; do
                echo "addr add $NET.${PIDX[$p]}.$((i + 1))/24 dev ${PIF[$p]}"
                [[ $p == m ]] || echo "link set ${PIF[$p]} mtu $mtu"
                echo "link set ${PIF[$p]} up"
            done
        } | ip -n "$ns" -batch -
        # the legs into their bridges; a mis-cabled node's plane legs swap bridges
        for p in M A B; do
            br=$p
            if [[ $i == "$miscable" && $p != M ]]; then
                if [[ $p == A ]]; then br=B; else br=A; fi
            fi
            [[ $p == M ]] || echo "link set n$i$p mtu $mtu"
            echo "link set n$i$p master br$br"
            echo "link set n$i$p up"
        done | ip -n "$SW" -batch -
        for p in a b; do
            restore_qdisc "$i" "$p"
        done
    done
    printf '%s\n' "link set brM up" "link set brA up" "link set brB up" |
        ip -n "$SW" -batch -

    # launcher pieces for "lab.sh mpirun"
    local slots
    slots=$(nproc 2>/dev/null || echo 1)
    ((slots >= 1)) || slots=1
    for ((i = 0; i < nodes; i++)); do
        echo "node$i slots=$slots"
    done >"$RUN/hostfile"
    write_agent "$nodes"

    wait_reachable "$nodes" "$miscable"
    UP_DONE=1
    trap - EXIT
}

# EXIT trap of "up": a failed up leaves nothing half-built behind (unless
# DUALRAIL_LAB_KEEP_FAILED=1, for debugging).
up_exit() {
    local rc=$?
    if [[ ${UP_DONE:-1} != 1 ]]; then
        if [[ ${DUALRAIL_LAB_KEEP_FAILED:-0} == 1 ]]; then
            warn "up failed; leaving the half-built lab for inspection (lab.sh down removes it)"
        else
            warn "up failed; tearing the half-built lab down"
            do_down
        fi
        ((rc)) || rc=1
    fi
    exit "$rc"
}

# The plm_rsh_agent: called like ssh (agent [ssh options] HOST CMD...); maps
# HOST (node<i>, a lab address, or P-n<i>) to node i and runs CMD through a
# shell there, in the node's netns (+/sys, /etc/hosts) and UTS namespace.
write_agent() {
    local nodes=$1 f=$RUN/rsh-agent
    cat >"$f" <<EOF
#!/bin/bash
# rsh/ssh launch agent of lab '$PREFIX' (generated by lab.sh; removed at down)
PREFIX=$PREFIX
NODES=$nodes
EOF
    cat >>"$f" <<'EOF'
while [ $# -gt 0 ]; do
    case $1 in
        --) shift; break ;;
        -[BbcDEeFIiJLlmOopQRSWw]) shift 2 ;;
        -*) shift ;;
        *) break ;;
    esac
done
if [ $# -lt 1 ]; then echo "lab rsh-agent: no host" >&2; exit 255; fi
host=${1#*@}; shift
i=
case $host in
    node[0-9]*) i=${host#node}; i=${i%%[!0-9]*} ;;
    "$PREFIX"-n[0-9]*) i=${host#"$PREFIX"-n} ;;
    10.209.[012].[0-9]*) i=$(( ${host##*.} - 1 )) ;;
esac
case $i in ''|*[!0-9]*) echo "lab rsh-agent: unknown host '$host'" >&2; exit 255 ;; esac
if [ "$i" -ge "$NODES" ]; then echo "lab rsh-agent: unknown host '$host'" >&2; exit 255; fi
if [ $# -lt 1 ]; then echo "lab rsh-agent: no command for $host" >&2; exit 255; fi
exec ip netns exec "$PREFIX-n$i" nsenter --uts="/run/$PREFIX/uts/node$i" -- /bin/bash -c "$*"
EOF
    chmod 755 "$f"
}

# Reachability before "up" returns: node0 pings every other node on all
# three networks, and every other node pings node0 on all three (all nodes
# in parallel).  Each network is one L2 segment, so this proves every leg
# works in both directions, i.e. every node reaches every other node.
# Each target gets retries until the deadline (UP_WAIT seconds).  A
# mis-cabled node (--miscable) is checked on the management network only, and
# the hub is node 1 when node 0 is the mis-cabled one.
wait_reachable() {
    local nodes=$1 mis=${2:-} i j p hub=0 pids=() rc=0 line
    local -a targets nets
    [[ $mis == 0 ]] && hub=1
    for ((i = 0; i < nodes; i++)); do
        targets=()
        for ((j = 0; j < nodes; j++)); do
            ((i == j)) && continue
            ((i == hub || j == hub)) || continue
            nets=(0 1 2)
            [[ $i == "$mis" || $j == "$mis" ]] && nets=(0)
            for p in "${nets[@]}"; do targets+=("$NET.$p.$((j + 1))"); done
        done
        # shellcheck disable=SC2016
        ip netns exec "$PREFIX-n$i" timeout $((UP_WAIT + 5)) bash -c '
            end=$((SECONDS + $1)); shift
            for t in "$@"; do
                until ping -c1 -W1 -q "$t" >/dev/null 2>&1; do
                    if ((SECONDS >= end)); then echo "unreachable $t"; exit 1; fi
                    echo "retry $t"
                    sleep 0.1
                done
            done' _ "$UP_WAIT" "${targets[@]}" >"$RUN/wait.$i" 2>&1 9<&- &
        pids+=($!)
    done
    for i in "${!pids[@]}"; do
        wait "${pids[$i]}" && continue
        line=unknown
        while read -r _ j; do line=$j; done <"$RUN/wait.$i"
        warn "node$i cannot reach $line within ${UP_WAIT}s"
        rc=1
    done
    if [[ -n ${DUALRAIL_LAB_DEBUG:-} ]]; then cat "$RUN"/wait.* >&2; fi
    rm -f "$RUN"/wait.*
    ((rc == 0)) || die "lab not fully connected"
}

# ---------------------------------------------------------------- status

# Short text for the root qdisc of DEV in "tc qdisc show" output $2, into QD.
qdisc_desc() {
    local line
    QD=none
    while read -r line; do
        [[ $line == *" dev $1 root "* ]] || continue
        if [[ $line =~ ^qdisc\ tbf\ .*\ rate\ ([^ ]+) ]]; then
            QD="tbf(${BASH_REMATCH[1]})"
        elif [[ $line =~ ^qdisc\ ([^ ]+) ]]; then
            QD=${BASH_REMATCH[1]}
            [[ $QD == noqueue ]] && QD=none
        fi
        return 0
    done <<<"$2"
}

cmd_status() {
    [[ $# -eq 0 ]] || die "status takes no arguments"
    need_root
    need_tools ip tc iptables nsenter
    require_up
    local n i p P ns dev line state addr links addrs q swq ipt qo qi fl host re
    local -a faults=()
    n=$ST_NODES
    echo "lab $PREFIX: up, $n nodes (switch namespace $SW; bridges brM brA brB)"
    echo "caps: plane a ${ST_RATE_A:-none}, plane b ${ST_RATE_B:-none} (configured; live qdiscs below)"
    [[ -z $ST_TCP_RETRIES2 ]] || echo "tcp_retries2: $ST_TCP_RETRIES2"
    [[ -z $ST_CC ]] || echo "tcp congestion control: $ST_CC"
    [[ -z $ST_MTU || $ST_MTU == 1500 ]] || echo "plane mtu: $ST_MTU"
    [[ -z $ST_MISCABLE ]] ||
        echo "mis-cabled: node$ST_MISCABLE (its ethA is on plane B's bridge, its ethB on plane A's)"
    swq=$(tc -n "$SW" qdisc show 2>/dev/null || true)
    for ((i = 0; i < n; i++)); do
        ns=$PREFIX-n$i
        links=$(ip -n "$ns" -o link show 2>/dev/null || true)
        addrs=$(ip -n "$ns" -o -4 addr show 2>/dev/null || true)
        q=$(tc -n "$ns" qdisc show 2>/dev/null || true)
        ipt=$(ip netns exec "$ns" iptables -S 2>/dev/null || true)
        host=$(nsenter --uts="$RUN/uts/node$i" hostname 2>/dev/null || echo '?')
        echo "node$i  netns $ns  hostname $host"
        for p in m a b; do
            dev=${PIF[$p]} P=${PUC[$p]}
            line='' state=MISSING addr=none
            while read -r line; do
                [[ $line =~ ^[0-9]+:\ ${dev}[@:] ]] && break
                line=''
            done <<<"$links"
            [[ $line =~ \ state\ ([A-Z]+) ]] && state=${BASH_REMATCH[1]}
            while read -r _ fl _ addr _; do
                [[ $fl == "$dev" ]] && break
                addr=none
            done <<<"$addrs"
            [[ -n $addr ]] || addr=none
            if [[ $p == m ]]; then
                printf '  %-4s %-15s %-7s\n' "$dev" "$addr" "$state"
                continue
            fi
            qdisc_desc "$dev" "$q"; qo=$QD
            qdisc_desc "n$i$P" "$swq"; qi=$QD
            fl=''
            [[ $line =~ \<([A-Z_,]*,)?UP[,\>] ]] || fl+=" down"
            [[ $qo == blackhole || $qi == blackhole ]] && fl+=" blackhole"
            re="-A DRLAB-$P [^"$'\n'"]*REJECT"
            [[ $ipt =~ $re ]] && fl+=" reset"
            flapper_alive "$RUN/flap-n$i$p.pid" && fl+=" flap"
            fl=${fl# }
            fl=${fl:-none}
            [[ $fl == none ]] || faults+=("  node$i plane $p: $fl")
            printf '  %-4s %-15s %-7s out=%-14s in=%-14s fault=%s\n' "$dev" "$addr" \
                "$state" "$qo" "$qi" "$fl"
        done
    done
    if ((${#faults[@]})); then
        echo "faults:"
        printf '%s\n' "${faults[@]}"
    else
        echo "faults: none"
    fi
}

# ---------------------------------------------------------------- fault

fault_heal() {
    local i=$1 p=$2 ns dev P k
    ns=$PREFIX-n$i dev=${PIF[$p]} P=${PUC[$p]}
    kill_flapper "$RUN/flap-n$i$p.pid"
    ip -n "$ns" link set "$dev" up
    restore_qdisc "$i" "$p"
    if ip netns exec "$ns" iptables -S "DRLAB-$P" >/dev/null 2>&1; then
        for ((k = 0; k < 20; k++)); do
            ip netns exec "$ns" iptables -D INPUT -i "$dev" -j "DRLAB-$P" 2>/dev/null || break
        done
        for ((k = 0; k < 20; k++)); do
            ip netns exec "$ns" iptables -D OUTPUT -o "$dev" -j "DRLAB-$P" 2>/dev/null || break
        done
        ip netns exec "$ns" iptables -F "DRLAB-$P"
        ip netns exec "$ns" iptables -X "DRLAB-$P"
    fi
}

cmd_fault() {
    need_root
    [[ $# -ge 3 ]] || die "usage: lab.sh fault NODE PLANE down|blackhole|reset|flap|heal"
    local node=$1 p=$2 kind=$3
    shift 3
    need_tools ip tc iptables
    require_up
    check_node "$node"
    check_plane "$p"
    p=${p,,}
    case $kind in
        down|blackhole|reset|heal) [[ $# -eq 0 ]] || die "fault $kind: unexpected argument '$1'" ;;
        flap) ;;
        *) die "bad fault kind '$kind' (expected down, blackhole, reset, flap or heal)" ;;
    esac
    take_lock
    local ns dev P peer
    ns=$PREFIX-n$node dev=${PIF[$p]} P=${PUC[$p]} peer=n$node$P
    case $kind in
        heal)
            fault_heal "$node" "$p"
            ;;
        down)
            ip -n "$ns" link set "$dev" down
            ;;
        blackhole)
            tc -n "$ns" qdisc replace dev "$dev" root blackhole
            tc -n "$SW" qdisc replace dev "$peer" root blackhole
            ;;
        reset)
            local ipt=(ip netns exec "$ns" iptables)
            if "${ipt[@]}" -S "DRLAB-$P" >/dev/null 2>&1; then
                "${ipt[@]}" -F "DRLAB-$P"
            else
                "${ipt[@]}" -N "DRLAB-$P"
            fi
            # let resets (ours included) leave; TCP gets a reset; the rest drops
            "${ipt[@]}" -A "DRLAB-$P" -p tcp --tcp-flags RST RST -o "$dev" -j ACCEPT
            "${ipt[@]}" -A "DRLAB-$P" -p tcp -j REJECT --reject-with tcp-reset
            "${ipt[@]}" -A "DRLAB-$P" -j DROP
            "${ipt[@]}" -C INPUT -i "$dev" -j "DRLAB-$P" 2>/dev/null ||
                "${ipt[@]}" -I INPUT -i "$dev" -j "DRLAB-$P"
            "${ipt[@]}" -C OUTPUT -o "$dev" -j "DRLAB-$P" 2>/dev/null ||
                "${ipt[@]}" -I OUTPUT -o "$dev" -j "DRLAB-$P"
            ;;
        flap)
            local d_down=1 d_up=1 count=60
            while (($#)); do
                case $1 in
                    --down) [[ $# -ge 2 ]] || die "--down needs seconds"; d_down=$2; shift 2 ;;
                    --up) [[ $# -ge 2 ]] || die "--up needs seconds"; d_up=$2; shift 2 ;;
                    --count) [[ $# -ge 2 ]] || die "--count needs a number"; count=$2; shift 2 ;;
                    *) die "fault flap: unknown option '$1'" ;;
                esac
            done
            [[ $d_down =~ ^[0-9]+(\.[0-9]+)?$ && $d_up =~ ^[0-9]+(\.[0-9]+)?$ ]] ||
                die "flap: --down/--up take seconds"
            if ! is_uint "$count" || ((count < 1 || count > 100000)); then
                die "flap: bad --count '$count'"
            fi
            kill_flapper "$RUN/flap-n$node$p.pid"
            # shellcheck disable=SC2016
            setsid bash -c '
                ns=$1 dev=$2 dd=$3 du=$4 n=$5
                for ((k = 0; k < n; k++)); do
                    ip -n "$ns" link set "$dev" down || exit 1
                    sleep "$dd"
                    ip -n "$ns" link set "$dev" up || exit 1
                    sleep "$du"
                done' "drlab-flap $PREFIX " "$ns" "$dev" "$d_down" "$d_up" "$count" \
                </dev/null >/dev/null 2>&1 9<&- &
            echo $! >"$RUN/flap-n$node$p.pid"
            ;;
    esac
}

# ---------------------------------------------------------------- exec, mpirun

cmd_exec() {
    need_root
    [[ $# -ge 2 ]] || die "usage: lab.sh exec NODE CMD..."
    need_tools ip nsenter
    require_up
    check_node "$1"
    local i=$1
    shift
    exec ip netns exec "$PREFIX-n$i" nsenter --uts="$RUN/uts/node$i" -- "$@"
}

cmd_mpirun() {
    need_root
    need_tools ip nsenter mpirun
    require_up
    local build=${DUALRAIL_BUILD_DIR:-build} pkglib comp
    [[ $build == /* ]] || build=$REPO/$build
    pkglib=/usr/lib/x86_64-linux-gnu/openmpi/lib/openmpi3
    if [[ ! -d $pkglib ]] && command -v ompi_info >/dev/null 2>&1; then
        pkglib=$(ompi_info --parsable --path pkglibdir 2>/dev/null | sed -n 's/^path:pkglibdir://p' | head -1)
    fi
    # Open MPI rejects a component path holding a missing directory (mpirun
    # then loses its own option parser), so a missing build dir is left out.
    if [[ -d $build/mpi_coll ]]; then
        comp=$build/mpi_coll:$pkglib
    else
        warn "note: $build/mpi_coll not found; mpirun runs without the DualRail component"
        comp=$pkglib
    fi
    export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
    export OMPI_MCA_mca_base_component_path=$comp
    # Every node sees all of the machine's cores: binding would stack the
    # ranks of different nodes on the same cores.  A default only; an explicit
    # --bind-to on the command line wins.
    export OMPI_MCA_hwloc_base_binding_policy=${OMPI_MCA_hwloc_base_binding_policy:-none}
    # Point-to-point traffic stays on the management network unless the caller
    # chooses the interfaces itself (Open MPI refuses a parameter given twice).
    local -a btl_if=(--mca btl_tcp_if_include ethM)
    # Open MPI 5's launcher (PRRTE) binds by itself and ignores the variable above: each
    # node bound its rank to core 0 of the same machine, so a 2-node job time-sliced one
    # core (8-byte allreduce 8 ms instead of 20 us on Debian 13). --bind-to none says
    # it to both releases; a --bind-to of the caller's wins.
    local -a bind=(--bind-to none)
    local a prev=
    for a in "$@"; do
        if [[ ($prev == --mca || $prev == -mca) && $a == btl_tcp_if_include ]]; then
            btl_if=()
        fi
        [[ $a != --bind-to && $a != -bind-to && $a != --bind-to=* ]] || bind=()
        prev=$a
    done
    # Open MPI 5's launcher (PRRTE) will not start when its session directory, named
    # for its pid (prterun.node0.PID.UID), already exists: one left by a launcher that was
    # killed (a test's timeout) under a pid that this process has now, pids being recycled
    # (32768 of them on the CI machine; "prte_session_dir failed ... Exists" failed a
    # failover test in a CI run). mpirun is exec'ed below with this very pid, so a
    # directory named for it is stale by construction. Open MPI 4.1 makes no such one.
    rm -rf "${TMPDIR:-/tmp}/prterun.node0.$$."*
    exec ip netns exec "$PREFIX-n0" nsenter --uts="$RUN/uts/node0" -- \
        mpirun --hostfile "$RUN/hostfile" \
        --mca plm_rsh_agent "$RUN/rsh-agent" \
        --mca oob_tcp_if_include ethM \
        "${btl_if[@]}" \
        "${bind[@]}" \
        --mca mca_base_component_path "$comp" \
        "$@"
}

cmd_nodes() {
    [[ $# -eq 0 ]] || die "nodes takes no arguments"
    need_root
    require_up
    echo "$ST_NODES"
}

cmd_addr() {
    [[ $# -eq 2 ]] || die "usage: lab.sh addr NODE m|a|b"
    need_root
    require_up
    check_node "$1"
    case $2 in m|a|b|M|A|B) ;; *) die "bad plane '$2' (expected m, a or b)" ;; esac
    addr_of "$1" "${2,,}"
}

# ---------------------------------------------------------------- main

main() {
    local cmd=${1:-help}
    [[ $# -gt 0 ]] && shift
    case $cmd in
        up) cmd_up "$@" ;;
        down) cmd_down "$@" ;;
        status) cmd_status "$@" ;;
        exec) cmd_exec "$@" ;;
        mpirun) cmd_mpirun "$@" ;;
        fault) cmd_fault "$@" ;;
        nodes) cmd_nodes "$@" ;;
        addr) cmd_addr "$@" ;;
        help|-h|--help) usage ;;
        *) usage >&2; die "unknown command '$cmd'" ;;
    esac
}

main "$@"
