#!/usr/bin/env bash
# Instructions per small MPI_Allreduce on rank 0, counted by callgrind: the one figure of the
# small-message path that does not move with this machine's noise (its latencies spread
# 15-30 % from run to run, more than a change of a tenth of the path's work moves them).
#
#   perf/instr_count.sh [--configs LIST] [--size BYTES] [--calls N] [--baseline-build DIR]
#                       [--functions N] [--coll NAME]
#
# For each configuration of LIST (names of contrib/lib/latency.sh; default
# dualrail-2a,dualrail-2u,ucx,ob1-tcp), dualrail-allreduce-bench's back-to-back rate loop
# (-r, SIZE bytes, default 8) runs on 2 lab nodes x 1 rank with rank 0 under
# `valgrind --tool=callgrind --toggle-collect=PMPI_Allreduce`, once with N calls (default
# 2000) and once with 3N: the difference over 2N is per call, so start-up and connection
# set-up cancel out. Rank 0 runs some 50 times slower than rank 1, so the peer's message is
# nearly always there when rank 0 looks; what is left of waiting is split off:
#   total      PMPI_Allreduce inclusive, per call
#   progress   the pollers inclusive (dr_mr_progress, opal_progress), per call
#   handlers   the message handlers inclusive (ucp_am_handler: ours for active messages;
#              ucp_eager_only_handler: UCP's tag path, pml ucx's and ours for whole small
#              messages, which ucx_mr receives with a receive each plane keeps posted:
#              Mr::tag_post (posting it, and what it finds in UCP's queue) and
#              Mr::tag_complete (handing one on) are counted too, as Mr::tag_receive, the
#              probe of UCP's queue before the twenty-second round of issue 11;
#              mca_btl_tcp_frag_recv and mca_pml_ob1_recv_frag_callback_match: ob1's,
#              whose libevent callback has no symbol), per call
#   work       total - progress + handlers: a call's own instructions without its polls
# --functions N: after the table, each configuration's N largest self costs per call by
# function (code inlined into a function counts as that function's, whichever file it came
# from), the same difference of two runs.
# --coll NAME (a dualrail-coll-bench collective: bcast, reduce, allgather, allgatherv,
# reduce_scatter_block, reduce_scatter, gather, scatter, barrier; default allreduce): the
# same count for MPI_<Name> in dualrail-coll-bench's loop (barrier, timed call, stop-flag
# broadcast; roots rotate), per iteration: for barrier and bcast the loop's own barrier or
# broadcast is the same function and counts too (in every configuration alike).
# With --baseline-build DIR each dualrail configuration also runs with the component and
# ucx_mr of DIR ("before"). Uses its own lab (prefix drinstr unless DUALRAIL_LAB_PREFIX is
# set), removed at exit. Needs root and valgrind (apt-get install valgrind). Bounded: each
# job under `timeout 600`.
set -euo pipefail
export LC_ALL=C
root=$(cd "$(dirname "$0")/.." && pwd)
configs=dualrail-2a,dualrail-2u,ucx,ob1-tcp size=8 calls=2000 baseline='' functions=0 coll=allreduce
while [ $# -gt 0 ]; do
  case "$1" in
    --configs) configs=${2:?}; shift ;;
    --size) size=${2:?}; shift ;;
    --calls) calls=${2:?}; shift ;;
    --baseline-build) baseline=${2:?}; shift ;;
    --functions) functions=${2:?}; shift ;;
    --coll) coll=${2:?}; shift ;;
    -h|--help) sed -n '2,35p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "instr_count.sh: unknown option $1" >&2; exit 1 ;;
  esac
  shift
done
[[ $size =~ ^[0-9]+$ && $size -ge 4 && $size -le 65536 ]] || { echo "instr_count.sh: --size 4..65536" >&2; exit 1; }
[[ $calls =~ ^[0-9]+$ && $calls -ge 100 && $calls -le 20000 ]] || { echo "instr_count.sh: --calls 100..20000" >&2; exit 1; }
[[ $functions =~ ^[0-9]+$ && $functions -le 200 ]] || { echo "instr_count.sh: --functions 0..200" >&2; exit 1; }
case "$coll" in
  allreduce) fn=PMPI_Allreduce ;;
  bcast|reduce|allgather|allgatherv|gather|scatter|barrier) fn=PMPI_${coll^} ;;
  reduce_scatter_block) fn=PMPI_Reduce_scatter_block ;;
  reduce_scatter) fn=PMPI_Reduce_scatter ;;
  *) echo "instr_count.sh: unknown collective $coll" >&2; exit 1 ;;
esac
if ! command -v valgrind >/dev/null || ! command -v callgrind_annotate >/dev/null; then
  echo "instr_count.sh: valgrind missing (apt-get install valgrind)" >&2
  exit 1
fi
# shellcheck source=contrib/lib/latency.sh
. "$root/contrib/lib/latency.sh" # latency_opts
for c in ${configs//,/ }; do
  latency_opts "$c" >/dev/null || { echo "instr_count.sh: unknown configuration $c" >&2; exit 1; }
done
# shellcheck source=contrib/lib/perf.sh
. "$root/contrib/lib/perf.sh" # perf_build
if [ -n "$baseline" ]; then
  DUALRAIL_BUILD_DIR=$baseline perf_build instr_count.sh "$root"
  baseline=$build
fi
perf_build instr_count.sh "$root" perf/dualrail-allreduce-bench perf/dualrail-coll-bench
export DUALRAIL_LAB_PREFIX=${DUALRAIL_LAB_PREFIX:-drinstr}
lab=$root/contrib/lab.sh
work=$(mktemp -d /tmp/dualrail-instr-XXXXXX)
trap '"$lab" down >/dev/null 2>&1 || true; rm -rf "$work"' EXIT
"$lab" up --nodes 2 >/dev/null

# Rank 0 under callgrind (its output in $work/out.<pid>), rank 1 as it is.
cat >"$work/rank0.sh" <<'EOS'
#!/bin/sh
dir=$1 fn=$2
shift 2
if [ "${OMPI_COMM_WORLD_RANK:-0}" = 0 ]; then
  exec valgrind --tool=callgrind --toggle-collect="$fn" \
    --callgrind-out-file="$dir/out.%p" "$@"
fi
exec "$@"
EOS
chmod +x "$work/rank0.sh"

count() { # name build calls -> callgrind file of rank 0 in $work/NAME.CALLS
  local name=$1 b=$2 n=$3 cfg=${1%@*}
  rm -f "$work"/out.*
  # shellcheck disable=SC2046 # latency_opts is a word list by design
  if ! DUALRAIL_BUILD_DIR=$b timeout 600 "$lab" mpirun -np 2 --map-by node $(latency_opts "$cfg") \
       "$work/rank0.sh" "$work" "$fn" "${bench[@]}" -m "$size:$size" -i "$n" \
       >"$work/$name.$n.log" 2>&1; then
    echo "instr_count.sh: $name ($n calls) failed:" >&2
    tail -n 20 "$work/$name.$n.log" >&2
    exit 1
  fi
  mv "$work"/out.* "$work/$name.$n"
}
if [ "$coll" = allreduce ]; then
  bench=("$build/perf/dualrail-allreduce-bench" -r)
else
  # no warm-up beyond the run's own (the two runs' difference cancels it), no time bound
  bench=("$build/perf/dualrail-coll-bench" -C "$coll" -x 2 -T 100000)
fi
names=()
for c in ${configs//,/ }; do
  names+=("$c")
  [[ -z $baseline || $c != dualrail-* ]] || names+=("$c@before")
done
for name in "${names[@]}"; do
  b=$build
  [[ $name != *@before ]] || b=$baseline
  echo "instr_count.sh: $name" >&2
  count "$name" "$b" "$calls"
  count "$name" "$b" $((3 * calls))
done

python3 - "$work" "$calls" "$size" "$functions" "$fn" "${names[@]}" <<'PY'
import re, subprocess, sys
work, calls, size, top, fn, names = (sys.argv[1], int(sys.argv[2]), int(sys.argv[3]),
                                     int(sys.argv[4]), sys.argv[5], sys.argv[6:])
POLL = ("dr_mr_progress", "opal_progress")
HANDLERS = ("ucp_am_handler", "ucp_eager_only_handler", "dualrail::mr::Mr::tag_receive",
            "dualrail::mr::Mr::tag_post", "dualrail::mr::Mr::tag_complete",
            "mca_btl_tcp_frag_recv", "mca_pml_ob1_recv_frag_callback_match")

def name_of(entry):
    """'FILE:[RET ]NAME(ARGS) [OBJ]' -> NAME: template functions come with their return type
    and names hold spaces, parentheses and braces inside <> and {} (lambdas)."""
    if entry.endswith("]") and " [" in entry:
        entry = entry[: entry.rindex(" [")]
    s, depth, cut, start = entry.split(":", 1)[-1], 0, None, 0
    for i, ch in enumerate(s):
        if ch in "<{":
            depth += 1
        elif ch in ">}":
            depth -= 1
        elif depth == 0 and ch == "(" and not s[:i].endswith("operator"):
            cut = i
            break
        elif depth == 0 and ch == " ":
            start = i + 1
    return s[start:cut]

def costs(path, inclusive=True):
    """Function -> cost: inclusive (the largest entry of a name) or self (summed over the
    files callgrind splits a function's inlined code into)."""
    out = subprocess.run(["callgrind_annotate", "--inclusive=" + ("yes" if inclusive else "no"),
                          "--auto=no", "--threshold=100", path],
                         capture_output=True, text=True, check=True).stdout
    cost = {}
    for line in out.splitlines():
        m = re.match(r"\s*([\d,]+) \(\s*[\d.]+%\)\s+(.+)", line)
        if m:
            fn = name_of(m.group(2))
            v = int(m.group(1).replace(",", ""))
            cost[fn] = max(cost.get(fn, 0), v) if inclusive else cost.get(fn, 0) + v
    return cost

def inclusive(path):
    return costs(path, True)

print(f"# instructions per {size}-byte {fn[1:]} on rank 0 (2 lab nodes x 1 rank, callgrind,")
print(f"# ({3 * calls} - {calls} calls) / {2 * calls}; work = total - progress + handlers)")
print("%-22s %9s %9s %9s %9s" % ("configuration", "total", "progress", "handlers", "work"))
for name in names:
    a, c = inclusive(f"{work}/{name}.{calls}"), inclusive(f"{work}/{name}.{3 * calls}")
    per = lambda keys: sum(c.get(k, 0) - a.get(k, 0) for k in keys) / (2 * calls)
    total, poll, hand = per((fn,)), per(POLL), per(HANDLERS)
    print("%-22s %9.0f %9.0f %9.0f %9.0f" % (name, total, poll, hand, total - poll + hand))
for name in names if top > 0 else []:
    a, c = costs(f"{work}/{name}.{calls}", False), costs(f"{work}/{name}.{3 * calls}", False)
    rows = sorted(((c.get(k, 0) - a.get(k, 0)) / (2 * calls), k) for k in set(a) | set(c))
    print(f"\n# {name}: the {top} largest self costs per call (instructions, function)")
    for v, k in [r for r in reversed(rows) if r[1] != "PROGRAM"][:top]:
        print("%9.0f  %s" % (v, k[:100]))
PY
