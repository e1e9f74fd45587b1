#!/usr/bin/env bash
# exports.sh UCX_MR_SO COMPONENT_SO INCLUDE_DIR: fails when libdualrail_ucx_mr.so exports
# anything but the dr_* C API declared in INCLUDE_DIR/dualrail/*.h, or mca_coll_dualrail.so
# anything but mca_coll_dualrail_component.
#
# Why: what a shared object exports can be interposed, so every call inside it to an
# exported function goes through the PLT and cannot be inlined (ucx_mr's C++ internals were
# all exported: send_start, send_data, post_am, on_am, ... on every segment's path). A
# component's other symbols also land in the namespace of every MPI process that loads it
# (Open MPI's components export their component structure only). The libraries are built
# with hidden visibility and a version script (ucx_mr/exports.map, mpi_coll/exports.map).
set -uo pipefail
lib=${1:?usage: exports.sh UCX_MR_SO COMPONENT_SO INCLUDE_DIR} comp=${2:?} inc=${3:?}
fail=0
for f in "$lib" "$comp"; do
  [ -f "$f" ] || { echo "exports.sh: no $f"; exit 2; }
done
syms() { nm -D --defined-only "$1" | awk 'NF >= 3 {print $3}' | sed 's/@.*//' | sort -u; }
lib_syms=$(syms "$lib")
[ -n "$lib_syms" ] || { echo "exports.sh: $lib exports nothing (nm failed?)"; exit 2; }
n=0
while IFS= read -r s; do
  n=$((n + 1))
  if [[ $s != dr_* ]]; then
    echo "exports.sh: $(basename "$lib") exports $s, not part of the dr_* API"
    fail=1
  elif ! grep -qw -- "$s" "$inc"/dualrail/*.h; then
    echo "exports.sh: $(basename "$lib") exports $s, which no header of $inc/dualrail declares"
    fail=1
  fi
done <<<"$lib_syms"
comp_syms=$(syms "$comp")
if [ "$comp_syms" != mca_coll_dualrail_component ]; then
  echo "exports.sh: $(basename "$comp") exports" $(head -c 600 <<<"$comp_syms") "(only mca_coll_dualrail_component should be)"
  fail=1
fi
if [ "$fail" -ne 0 ]; then
  echo "exports.sh: FAIL"
  exit 1
fi
echo "exports.sh: PASS: $(basename "$lib") exports $n dr_* functions of the public headers, $(basename "$comp") its component structure only"
