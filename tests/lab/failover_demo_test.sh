#!/usr/bin/env bash
# Lab test: a windowed 4 MiB stream between two nodes survives a fault on plane A
# (every message verified by the receiver and acknowledged), and plane A returns.
# Under this load, destroying a black-holed UCX 1.13 TCP endpoint without severing
# its sockets first crashed the process (see Mr::sever_sockets).
#   failover_demo_test.sh DEMO_BINARY KIND [KIND...]
set -euo pipefail
demo=$1; shift
root=$(cd "$(dirname "$0")/../.." && pwd)
lab="$root/contrib/lab.sh"
pass=0 fail=0
for kind in "$@"; do
  dir=$(mktemp -d /tmp/dualrail-demo-XXXXXX)
  timeout 150 "$lab" exec 1 "$demo" server "$dir" ethA,ethB >"$dir/server.log" 2>&1 &
  srv=$!
  rc=0
  timeout 150 "$lab" exec 0 "$demo" client "$dir" ethA,ethB "$lab" 1 "$kind" >"$dir/client.log" 2>&1 || rc=$?
  src=0
  wait "$srv" || src=$?
  "$lab" fault 1 a heal >/dev/null 2>&1 || true
  if [ "$rc" -eq 0 ] && [ "$src" -eq 0 ] &&
     grep -q "every one acknowledged" "$dir/client.log" &&
     grep -q "plane A re-admitted" "$dir/client.log" &&
     grep -q "received and verified" "$dir/server.log"; then
    echo "ok: $kind"
    grep -A7 "^phase" "$dir/client.log"
    pass=$((pass + 1))
  else
    echo "FAILED: $kind (client rc $rc, server rc $src)"
    tail -n 30 "$dir/client.log" "$dir/server.log"
    fail=$((fail + 1))
  fi
  rm -rf "$dir"
done
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
