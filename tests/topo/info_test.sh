#!/usr/bin/env bash
# dualrail-info on the committed topologies: text and JSON output, choices for
# a CPU set, a GPU and a local rank, and every error path (exit 1: the planes
# or a choice fail; exit 2: bad command line).
# usage: info_test.sh PATH/TO/dualrail-info PATH/TO/tests/topo
set -uo pipefail
INFO=$1
TOPO=$2
DGX=$TOPO/dgx-2s8g8n.xml
SKEW=$TOPO/2s4n-skew.xml
ONE=$TOPO/1s2n.xml
PASS=0 FAIL=0
ok() { PASS=$((PASS + 1)); echo "PASS: $*"; }
bad() { FAIL=$((FAIL + 1)); echo "FAIL: $*"; }

# expect DESCRIPTION STATUS PATTERN -- ARGS...: exit status STATUS, output matches PATTERN (grep -E)
expect() {
    local d=$1 want=$2 pat=$3 out rc
    shift 4
    out=$(timeout 30 "$INFO" "$@" 2>&1)
    rc=$?
    if [[ $rc -ne $want ]]; then
        bad "$d: exit $rc, expected $want"; printf '%s\n' "$out" | sed 's/^/    /'
    elif ! grep -qE -- "$pat" <<<"$out"; then
        bad "$d: output lacks /$pat/"; printf '%s\n' "$out" | sed 's/^/    /'
    else
        ok "$d"
    fi
}

expect "DGX: planes discovered by IB subnet prefix" 0 \
    'planes    2, discovered: mlx5_0:1\|mlx5_2:1\|mlx5_4:1\|mlx5_6:1,mlx5_1:1\|mlx5_3:1\|mlx5_5:1\|mlx5_7:1' -- -t "$DGX"
expect "DGX: plane 1 identity" 0 'plane 1  ib:fec0:0000:0000:000b' -- -t "$DGX"
expect "DGX: device locality row" 0 'mlx5_5:1 +0000:9a:00.0 +1 +1 +16-31,48-63 +ibp154s0 +IB active' -- -t "$DGX"
expect "DGX: management port is in no plane" 0 'eno1 +0000:02:00.0' -- -t "$DGX"
expect "DGX: per GPU table" 0 '0000:19:00.0  0     mlx5_0:1 switch/8 +mlx5_1:1 switch/4' -- -t "$DGX" --all-gpus
expect "DGX: CPU core 11 -> mlx5_2" 0 'plane 0 -> mlx5_2:1 +nearest to CPUs 11: same NUMA node; 2 equally near' -- -t "$DGX" --cpus 11
expect "DGX: GPU b5:00.0 -> mlx5_7 on plane 1" 0 'plane 1 -> mlx5_7:1 +nearest to GPU 0000:b5:00.0: same PCIe switch \(8 PCIe hops\)' -- -t "$DGX" --gpu 0000:b5:00.0
expect "DGX: local rank 2 unbound -> mlx5_4" 0 'plane 0 -> mlx5_4:1 +process not bound to CPUs; 4 equally near, spread by local rank 2' -- -t "$DGX" --local-rank 2
expect "DGX: given plane list" 0 'planes    2, given: mlx5_0\|mlx5_2,mlx5_1\|mlx5_3' -- -t "$DGX" -p 'mlx5_0|mlx5_2,mlx5_1|mlx5_3' --cpus 40
expect "DGX: JSON" 0 '"device": "mlx5_0:1", "level": "switch", "hops": 4' -- -t "$DGX" --json --all-gpus
if command -v python3 >/dev/null 2>&1; then
    if timeout 30 "$INFO" -t "$DGX" --json --all-gpus | python3 -c 'import json,sys; d=json.load(sys.stdin); assert len(d["planes"]) == 2 and len(d["gpus"]) == 8 and d["gpus"][7]["choice"][1]["device"] == "mlx5_7:1"'; then
        ok "DGX: JSON parses and holds the per-GPU choices"
    else
        bad "DGX: JSON does not parse or lacks fields"
    fi
fi
expect "skew: discovery by RoCE subnets" 0 'planes    2, discovered: mlx5_0:1\|mlx5_1:1,mlx5_2:1\|mlx5_3:1' -- \
    -t "$SKEW" --ifaddr ens3f0np0=10.1.0.9/16 --ifaddr ens5f0np0=10.1.1.9/16 \
    --ifaddr ens6f0np0=10.2.0.9/16 --ifaddr ens7f0np0=10.2.1.9/16
expect "skew: socket-1 core takes a remote plane-A NIC" 0 'plane 0 -> mlx5_1 +nearest to CPUs 13: other socket' -- \
    -t "$SKEW" -p 'mlx5_0|mlx5_1,mlx5_2|mlx5_3' --cpus 13

# errors
expect "missing topology file" 1 'no-such.xml: No such file' -- -t "$TOPO/no-such.xml"
expect "unparsable topology file" 1 'not an hwloc XML topology' -- -t "$TOPO/info_test.sh"
expect "plane with no device on this node" 1 "plane 1 -> error: none of the plane's devices \(mlx5_9\) is on this node" -- -t "$DGX" -p mlx5_0,mlx5_9
expect "GPU not in the topology" 1 'GPU 0000:42:00.0 is not a PCI device' -- -t "$DGX" --gpu 0000:42:00.0
expect "CPU set outside the machine" 1 'CPU set 64-70 is not within' -- -t "$DGX" --cpus 64-70
expect "RoCE without addresses: no plane" 1 'no network plane found.*ens1f0np0 has no IPv4 address' -- -t "$ONE"
expect "bad plane list" 2 'plane 1 has an empty device name' -- -t "$DGX" -p 'mlx5_0,'
expect "bad --ifaddr" 2 "bad --ifaddr 'eth0=1.2.3/8'" -- -t "$ONE" --ifaddr eth0=1.2.3/8
expect "unknown option" 2 'unrecognised option|unrecognized option' -- --frobnicate
expect "help" 0 'usage: dualrail-info' -- --help
# this machine: loopback is always there
expect "live: given plane lo" 0 "plane 0 -> lo +the plane's only device" -- -p lo

echo "$PASS passed, $FAIL failed"
[[ $FAIL -eq 0 ]]
