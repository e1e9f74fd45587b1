#!/usr/bin/env bash
# ompi_version_calls.sh SOURCE_DIR: fails when a file of the Open MPI glue outside
# mpi_coll/compat/ names an Open MPI call or type that exists in only one of the two
# supported releases (4.1, 5.0).
#
# Why: each stack builds only its own release, so such a call builds and passes on one stack
# and breaks the build of the other, which CI may run less often (ompi_comm_get_cid, 4.1
# only, in a decline message broke the Debian 13 build). The compat header wraps each of
# them once for both releases.
set -uo pipefail
src=${1:?usage: ompi_version_calls.sh SOURCE_DIR}
cd "$src/mpi_coll" 2>/dev/null || { echo "ompi_version_calls.sh: no $src/mpi_coll"; exit 2; }
# 4.1 only: ompi_comm_get_cid. 5.0 only: ompi_comm_get_local_cid, ompi_comm_get_extended_cid,
# OMPI_COMM_IS_GLOBAL_INDEX. The component structs and their version macros differ by name.
pat='\b(ompi_comm_get_cid|ompi_comm_get_local_cid|ompi_comm_get_extended_cid|OMPI_COMM_IS_GLOBAL_INDEX|mca_coll_base_component_2_[0-9]_0_t|MCA_COLL_BASE_VERSION_2_[0-9]_0)\b'
n=0
for f in *.c *.h; do
  [ -f "$f" ] && n=$((n + 1))
done
[ "$n" -gt 0 ] || { echo "ompi_version_calls.sh: no glue files under $src/mpi_coll"; exit 2; }
hits=$(grep -nE "$pat" -- *.c *.h)
if [ -n "$hits" ]; then
  while IFS= read -r h; do echo "ompi_version_calls.sh: mpi_coll/$h"; done <<<"$hits"
  echo "ompi_version_calls.sh: FAIL: the glue names Open MPI calls of one release only; use mpi_coll/compat/coll_dualrail_compat.h"
  exit 1
fi
echo "ompi_version_calls.sh: PASS: $n glue files, none names a call of one release only outside compat/"
